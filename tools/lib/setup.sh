# tools/lib/setup.sh: shared set-up for tools/quickstart.sh, tools/test.sh and the benchmark
# scripts (sourced, not run).
#
# homarpc builds only against Debian 12's packages (nothing is vendored or downloaded at build
# time), so setting up a machine means installing those packages. homarpc_setup() checks each
# one with `dpkg -s` and runs apt-get only when something is missing, which keeps a second run
# fast. As root it installs what is missing; otherwise it names the missing packages and exits 1.
# HOMARPC_SKIP_SETUP=1 skips the check (for machines that provide the tools some other way).
#
# Defines: HOMARPC_ROOT (the repository root), homarpc_setup, homarpc_configure_release,
# homarpc_log, homarpc_die. (The measuring scripts' build step: measure_programs, measure.sh.)

# shellcheck disable=SC2034  # used by the scripts that source this file
HOMARPC_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# What building, testing, fuzzing and benchmarking homarpc needs.
HOMARPC_PACKAGES=(
  cmake ninja-build pkg-config g++
  clang libclang-rt-14-dev  # clang, plus its libFuzzer and sanitizer runtimes
  llvm                      # llvm-symbolizer, for file:line in sanitizer reports
  liburing-dev libabsl-dev
  libprotobuf-dev libprotoc-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc
  libgtest-dev libgmock-dev libbenchmark-dev
  iproute2 gnuplot-nox      # ip/tc for network experiments; plots in benchmark reports
)

homarpc_log() { printf '[homarpc] %s\n' "$*" >&2; }
homarpc_die() { printf '[homarpc] error: %s\n' "$*" >&2; exit 1; }

# Prints the packages of HOMARPC_PACKAGES that are not fully installed, one per line.
homarpc_missing_packages() {
  local pkg status
  for pkg in "${HOMARPC_PACKAGES[@]}"; do
    # `|| true`: dpkg -s fails for a package it has never heard of.
    status="$(dpkg -s "$pkg" 2>/dev/null | sed -n 's/^Status: //p' || true)"
    if [[ "$status" != "install ok installed" ]]; then
      echo "$pkg"
    fi
  done
}

homarpc_setup() {
  if [[ "${HOMARPC_SKIP_SETUP:-0}" == 1 ]]; then
    homarpc_log "HOMARPC_SKIP_SETUP=1: not checking distribution packages"
    return 0
  fi
  if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    homarpc_die "these scripts set up Debian 12 (dpkg/apt-get not found). Install the" \
      "equivalents of: ${HOMARPC_PACKAGES[*]}; then rerun with HOMARPC_SKIP_SETUP=1."
  fi
  local missing
  mapfile -t missing < <(homarpc_missing_packages)
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if [[ "$(id -u)" != 0 ]]; then
    homarpc_die "missing packages: ${missing[*]}. Install them as root" \
      "(apt-get install ${missing[*]}) or run this script as root."
  fi
  homarpc_log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
  mapfile -t missing < <(homarpc_missing_packages)
  if ((${#missing[@]} != 0)); then
    homarpc_die "apt-get did not install: ${missing[*]}"
  fi
}

# homarpc_configure_release DIR [CMAKE_ARG...]: configures DIR (from the current directory's
# source tree) the way programs are built to be run and measured: g++, RelWithDebInfo, no
# sanitizers, no tests, no trace points; then any further cmake arguments
# (tools/call-timeline.sh adds -DHOMARPC_TRACE_POINTS=ON).
homarpc_configure_release() {
  local dir="$1" cxx
  cxx="$(command -v g++ || true)"
  [[ -n "$cxx" ]] || homarpc_die "g++ not found"
  homarpc_log "configuring $dir with $cxx (RelWithDebInfo, no sanitizers, no tests${2:+; ${*:2}})"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHOMARPC_SANITIZE=OFF -DHOMARPC_BUILD_TESTS=OFF -DHOMARPC_TRACE_POINTS=OFF "${@:2}" >&2
}

#!/usr/bin/env bash
# tools/test.sh: builds everything with AddressSanitizer and UndefinedBehaviorSanitizer and runs
# every test. This is what CI runs (.ci/run).
#
#   tools/test.sh              # all tests
#   tools/test.sh -R Engine    # extra arguments go to ctest (-R regex, -L label, -V, ...)
#
# Installs missing Debian packages first (tools/lib/setup.sh), then configures build-asan/
# (Debug, clang++ when available so fuzz targets get libFuzzer, else g++), builds it and runs
# ctest. The exit status is ctest's: 0 only when every selected test passed; a build that finds
# no test at all fails too.
set -euo pipefail

# shellcheck source=tools/lib/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/setup.sh"
cd "$HOMARPC_ROOT"
homarpc_setup

build_dir=build-asan
cxx="$(command -v clang++ || command -v g++ || true)"
[[ -n "$cxx" ]] || homarpc_die "no C++ compiler found (clang++ or g++)"

homarpc_log "configuring $build_dir with $cxx (Debug, ASan+UBSan)"
cmake -S . -B "$build_dir" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Debug \
  -DHOMARPC_SANITIZE=ON \
  -DHOMARPC_BUILD_TESTS=ON
homarpc_log "building $build_dir"
cmake --build "$build_dir"

# Sanitizer settings: stop at the first error with a stack trace. Options the caller already
# set come last, so they win.
detect_leaks=1
# LeakSanitizer cannot run under ptrace (a debugger, strace, some sandboxes).
if [[ "$(sed -n 's/^TracerPid:[[:space:]]*//p' /proc/self/status 2>/dev/null)" != 0 ]]; then
  homarpc_log "running under a tracer: LeakSanitizer off"
  detect_leaks=0
fi
export ASAN_OPTIONS="detect_leaks=${detect_leaks}:halt_on_error=1:abort_on_error=0:strict_init_order=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

homarpc_log "running ctest $*"
# ctest prints the summary line ("100% tests passed, 0 tests failed out of N") itself.
exec ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j2 "$@"

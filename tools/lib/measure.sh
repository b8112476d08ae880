# tools/lib/measure.sh: the command-line shape the measuring scripts share (tools/rpc-ratios.sh,
# tools/call-instructions.sh, tools/call-timeline.sh; sourced, not run): one-line errors that
# name the script, --help from the script's header comment, --build=DIR and --no-build, and
# the programs a run needs built in DIR (or, with --no-build, checked to be there).
#
# The script sets MEASURE_SCRIPT (its name, for messages) and `build` (its default directory)
# before sourcing, and `calls` (its default count) if it takes measure_calls_option's options.
# Sets no_build=0 and keep=""; defines measure_usage_error, measure_fail, measure_common_option,
# measure_calls_option, measure_count and measure_programs.

no_build=0
keep=""

# measure_usage_error MESSAGE: "<script>: MESSAGE" on stderr and exit status 2 (a bad option).
measure_usage_error() {
  echo "$MEASURE_SCRIPT: $1" >&2
  exit 2
}

# measure_fail MESSAGE: the same, exit status 1 (the run failed).
measure_fail() {
  echo "$MEASURE_SCRIPT: $1" >&2
  exit 1
}

# measure_common_option ARG: takes --build=DIR, --no-build and -h/--help (printing the script's
# header comment); returns 1 for any other argument.
measure_common_option() {
  case "$1" in
    --build=*)
      build="${1#*=}"
      [[ -n "$build" ]] || measure_usage_error "--build: empty directory"
      ;;
    --no-build) no_build=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) return 1 ;;
  esac
}

# measure_calls_option ARG: takes --calls=N (into `calls`, 1..999999) and --keep=DIR (into
# `keep`), the options of the scripts that measure one traced run (call-instructions,
# call-timeline); returns 1 for any other argument.
measure_calls_option() {
  case "$1" in
    --calls=*)
      calls="${1#*=}"
      measure_count --calls "$calls" 999999
      ;;
    --keep=*)
      keep="${1#*=}"
      [[ -n "$keep" ]] || measure_usage_error "--keep: empty directory"
      ;;
    *) return 1 ;;
  esac
}

# measure_count OPTION VALUE MAX: VALUE, given to OPTION, must be a whole number from 1 to MAX.
measure_count() {
  [[ "$2" =~ ^[1-9][0-9]*$ && ${#2} -le ${#3} ]] && (($2 <= $3)) ||
    measure_usage_error "$1: '$2' is not a number from 1 to $3"
}

# measure_programs [CMAKE_ARG...] -- PROGRAM...: unless --no-build, installs what is missing
# (setup.sh) and builds the programs in $build, configured as homarpc_configure_release does
# plus the cmake arguments; then fails unless each is there ($build/tools/PROGRAM).
measure_programs() {
  local cmake_args=()
  while (($#)) && [[ "$1" != "--" ]]; do
    cmake_args+=("$1")
    shift
  done
  shift  # the "--"
  if ((!no_build)); then
    # shellcheck source=tools/lib/setup.sh disable=SC1091
    source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
    homarpc_setup
    homarpc_configure_release "$build" ${cmake_args[@]+"${cmake_args[@]}"}
    cmake --build "$build" --target "$@" >&2
  fi
  local program
  for program in "$@"; do
    [[ -x "$build/tools/$program" ]] ||
      measure_fail "$build/tools/$program not found (build it, or drop --no-build)"
  done
}

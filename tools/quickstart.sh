#!/usr/bin/env bash
# tools/quickstart.sh: from a fresh checkout to Homa RPCs on this machine in one command.
#
#   tools/quickstart.sh            # set up, build, run the demo
#   tools/quickstart.sh --help     # extra arguments go to homarpc-demo
#
# Installs missing Debian packages (tools/lib/setup.sh), builds the optimized tree in build/
# (RelWithDebInfo, g++, no sanitizers, no tests), then runs build/tools/homarpc-demo: an echo
# server in a child process and a client that exchange messages of several sizes over Homa/UDP
# on loopback, printing round-trip percentiles and goodput. Only loopback is used.
set -euo pipefail

# shellcheck source=tools/lib/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/setup.sh"
cd "$HOMARPC_ROOT"
homarpc_setup

build_dir=build
homarpc_configure_release "$build_dir"
homarpc_log "building $build_dir"
cmake --build "$build_dir"

demo="$build_dir/tools/homarpc-demo"
[[ -x "$demo" ]] || homarpc_die "$demo was not built (is the homarpc-demo target in tools/CMakeLists.txt?)"
homarpc_log "running $demo $*"
exec "$demo" "$@"

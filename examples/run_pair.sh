#!/bin/bash
# run_pair.sh: the examples' end-to-end check, run by ctest (examples/*/CMakeLists.txt).
#
#   run_pair.sh SERVER CLIENT EXPECTED_TEXT [CLIENT_ARGS...]
#
# Starts `SERVER --port=0`, waits for the line it prints ("... listening on <addr>:<port>"),
# runs `CLIENT --target=localhost:<port> CLIENT_ARGS...`, then stops the server with SIGTERM.
# Passes when the client exits 0, its output contains EXPECTED_TEXT (a fixed string), and the
# server then shuts down cleanly (exit status 0). Both outputs are printed, the server's last.
set -u
server=$1
client=$2
expected=$3
shift 3

dir=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null
  fi
  echo "---- server output ----"
  cat "$dir/server.out"
  rm -rf "$dir"
}
trap cleanup EXIT

"$server" --port=0 >"$dir/server.out" 2>&1 &
server_pid=$!

# Wait for the server to say which port it got: up to 60 s, as sanitizer builds start slowly.
port=""
for _ in $(seq 600); do
  port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$dir/server.out" | head -n 1)
  [ -n "$port" ] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "run_pair: $server exited before listening"
    exit 1
  fi
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "run_pair: $server did not report a port within 60 s"
  exit 1
fi

"$client" "--target=localhost:$port" "$@" >"$dir/client.out" 2>&1
rc=$?
cat "$dir/client.out"
if [ "$rc" -ne 0 ]; then
  echo "run_pair: $client exited with status $rc"
  exit 1
fi
if ! grep -qF -- "$expected" "$dir/client.out"; then
  echo "run_pair: the client's output lacks \"$expected\""
  exit 1
fi
kill "$server_pid"
wait "$server_pid"
server_rc=$?
server_pid=""
if [ "$server_rc" -ne 0 ]; then
  echo "run_pair: $server exited with status $server_rc after SIGTERM"
  exit 1
fi
echo "run_pair: ok"

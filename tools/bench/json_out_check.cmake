# The ctest homarpc_bench_json_out (tools/CMakeLists.txt): --json_out=FILE appends every JSON
# line to FILE, creating it, while stdout keeps what --json selects. Three tiny loopback runs,
# each one point of homarpc: cpu with Markdown on stdout (FILE created), cpu with --json (FILE
# appended; stdout and FILE hold the same line), and unary (an RPC scenario, Markdown).
# Run as: cmake -DBENCH=<homarpc-bench> -DOUT=<scratch file> -P json_out_check.cmake
file(REMOVE "${OUT}")
set(cpu_args --scenario=cpu --systems=homarpc --cpu_rate=500 --duration_ms=300 --warmup=3)
set(cpu_json "\"scenario\":\"cpu\",\"system\":\"homarpc\",")
set(unary_json "\"scenario\":\"unary\",\"system\":\"homarpc\",\"size\":64,")

function(run_bench)
  execute_process(COMMAND "${BENCH}" ${ARGN} "--json_out=${OUT}" RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}: exit status ${rc}; stderr: ${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# The JSON lines FILE holds now, and a check that there are `count` of them.
function(read_lines count)
  if(NOT EXISTS "${OUT}")
    message(FATAL_ERROR "--json_out did not create ${OUT}")
  endif()
  file(STRINGS "${OUT}" lines)
  list(LENGTH lines n)
  if(NOT n EQUAL count)
    message(FATAL_ERROR "${OUT} holds ${n} lines, expected ${count}: ${lines}")
  endif()
  set(lines "${lines}" PARENT_SCOPE)
endfunction()

function(expect_in text what where)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${where} lacks '${what}': ${text}")
  endif()
endfunction()

# 1: Markdown on stdout, the JSON line in the (new) file only.
run_bench(${cpu_args})
expect_in("${out}" "## cpu" "stdout (Markdown)")
expect_in("${out}" "| homarpc |" "stdout (Markdown)")
string(FIND "${out}" "{\"scenario\"" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "stdout holds JSON without --json: ${out}")
endif()
read_lines(1)
list(GET lines 0 first)
expect_in("${first}" "${cpu_json}" "${OUT} line 1")

# 2: --json: the same line on stdout and appended to the file, the first line kept.
run_bench(${cpu_args} --json)
read_lines(2)
list(GET lines 0 kept)
list(GET lines 1 second)
if(NOT kept STREQUAL first)
  message(FATAL_ERROR "${OUT} line 1 changed: ${kept}")
endif()
expect_in("${second}" "${cpu_json}" "${OUT} line 2")
string(STRIP "${out}" stdout_line)
if(NOT stdout_line STREQUAL second)
  message(FATAL_ERROR "stdout '${stdout_line}' is not the appended line '${second}'")
endif()

# 3: an RPC scenario writes its JSON lines too.
run_bench(--scenario=unary --systems=homarpc --sizes=64 --iterations=20 --warmup=2
          --duration_ms=1000)
expect_in("${out}" "| homarpc |" "stdout (Markdown)")
read_lines(3)
list(GET lines 2 third)
expect_in("${third}" "${unary_json}" "${OUT} line 3")
message(STATUS "ok: ${OUT} holds the JSON lines of three runs")

# The ctest homarpc_bench_floor_work (tools/CMakeLists.txt): udp-floor-work adds
# --floor_work_ns of busy work to every call of the raw UDP ping-pong, inside the timed call,
# so its p50 is at least that long; it runs only when --systems names it (--list says so, and
# a unary run without --systems leaves it out).
# Run as: cmake -DBENCH=<homarpc-bench> -P floor_work_check.cmake
set(common --scenario=unary --json --sizes=64 --iterations=30 --warmup=5 --duration_ms=2000
    --cpu_probe_ms=0)

execute_process(COMMAND "${BENCH}" ${common} --systems=udp-floor-work --floor_work_ns=40000
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "udp-floor-work run: exit status ${rc}; stderr: ${err}")
endif()
if(NOT out MATCHES "\"system\":\"udp-floor-work\",\"size\":64,[^\n]*\"p50_us\":([0-9.]+)")
  message(FATAL_ERROR "no udp-floor-work line with a p50: ${out}")
endif()
if(CMAKE_MATCH_1 LESS 40)
  message(FATAL_ERROR "udp-floor-work p50 ${CMAKE_MATCH_1} us is below its 40 us of work")
endif()

execute_process(COMMAND "${BENCH}" --list RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "udp-floor-work \\(only when named\\)")
  message(FATAL_ERROR "--list does not mark udp-floor-work as run only when named: ${out}")
endif()

execute_process(COMMAND "${BENCH}" ${common} --iterations=5 --sizes=64 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "default unary run: exit status ${rc}; stderr: ${err}")
endif()
if(NOT out MATCHES "\"system\":\"udp-floor\"" OR out MATCHES "udp-floor-work")
  message(FATAL_ERROR "a unary run without --systems should run udp-floor, not udp-floor-work: ${out}")
endif()

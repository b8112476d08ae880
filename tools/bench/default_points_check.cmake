# The ctest homarpc_bench_rpc_default_points (tools/CMakeLists.txt): without --sizes and
# --concurrency, unary runs 64 B, 1 KiB, 16 KiB and 1 MiB and throughput 64 B at 1, 8, 32 and
# 128 calls in flight, each with gRPC and homarpc answering (the points issue 3's targets are
# measured at), and unary's 1 MiB point has the raw TCP echo beside them; asked for 64 B and
# 64 KiB, the TCP echo runs at 64 KiB only. A few calls each.
# Run as: cmake -DBENCH=<homarpc-bench> -P default_points_check.cmake
set(common --json --iterations=5 --warmup=2 --duration_ms=2000 --cpu_probe_ms=0)

function(run_and_expect scenario)
  execute_process(COMMAND "${BENCH}" --scenario=${scenario} ${common} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${scenario} at its default points: exit status ${rc}; stderr: ${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(expect_point system size concurrency)
  if(NOT out MATCHES "\"system\":\"${system}\",\"size\":${size},\"concurrency\":${concurrency},")
    message(FATAL_ERROR "no ${system} line at ${size} B x${concurrency}: ${out}")
  endif()
endfunction()

run_and_expect(unary)
foreach(size 64 1024 16384 1048576)
  expect_point(grpc ${size} 1)
  expect_point(homarpc ${size} 1)
endforeach()
expect_point(tcp-floor 1048576 1)

run_and_expect(throughput)
foreach(concurrency 1 8 32 128)
  expect_point(grpc 64 ${concurrency})
  expect_point(homarpc 64 ${concurrency})
endforeach()

# tcp-floor in unary: a line at 64 KiB, none at 64 B (it skips sizes under 64 KiB).
run_and_expect(unary --systems=tcp-floor --sizes=64,64K)
expect_point(tcp-floor 65536 1)
if(out MATCHES "\"system\":\"tcp-floor\",\"size\":64,")
  message(FATAL_ERROR "tcp-floor ran at 64 B: ${out}")
endif()

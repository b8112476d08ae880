# Runs one libFuzzer target for a bounded time as a ctest (see CMakeLists.txt).
#
#   cmake -DFUZZER=<exe> -DSEEDS=<dir> -DWORK_DIR=<dir> -DSECONDS=<n> -DRUNS=<n> -P run_fuzz.cmake
#
# WORK_DIR is emptied and refilled with the seeds on every run, so the test always starts from
# the committed corpus and never writes into the source tree. Crash reproducers
# (crash-*, leak-*, timeout-*) are written into WORK_DIR/artifacts/.
foreach(var FUZZER SEEDS WORK_DIR SECONDS RUNS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzz.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
file(GLOB seeds ${SEEDS}/*)
if(seeds)
  file(COPY ${seeds} DESTINATION ${WORK_DIR}/corpus)
endif()

execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -runs=${RUNS} -print_final_stats=1
          -artifact_prefix=${WORK_DIR}/artifacts/ ${WORK_DIR}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (exit ${rc}); reproducers in ${WORK_DIR}/artifacts")
endif()

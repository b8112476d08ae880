# Runs ${BENCH} ${ARGS} and fails unless it exits with ${EXPECT_RC} and prints exactly one
# line on stderr containing ${EXPECT_TEXT}. Used by tools/CMakeLists.txt for the flag tests.
execute_process(COMMAND ${BENCH} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}; stderr: ${err}")
endif()
string(FIND "${err}" "${EXPECT_TEXT}" found)
if(found EQUAL -1)
  message(FATAL_ERROR "stderr lacks '${EXPECT_TEXT}': ${err}")
endif()
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT lines EQUAL 1)
  message(FATAL_ERROR "expected one line on stderr, got ${lines}: ${err}")
endif()
message(STATUS "ok: exit ${rc}: ${err}")

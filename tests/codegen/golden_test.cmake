# Golden-file test of protoc-gen-homarpc (run by ctest as codegen_golden; README.md).
#
# Runs protoc with the plugin on every .proto under PROTO_DIR and compares each generated
# *.homarpc.pb.{h,cc} with its copy under GOLDEN_DIR (same relative path); fails with a
# unified diff (on stdout) for each difference, and a list of differing, missing and extra
# files. With -DUPDATE=ON it replaces
# GOLDEN_DIR's contents with the new output instead (`ninja codegen_update_golden`).
#
# Inputs (-D): PROTOC, PLUGIN, PROTO_DIR, GOLDEN_DIR, WORK_DIR, PROTOBUF_INCLUDE_DIR, UPDATE.
cmake_minimum_required(VERSION 3.20)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
file(GLOB_RECURSE protos RELATIVE "${PROTO_DIR}" "${PROTO_DIR}/*.proto")
list(SORT protos)
execute_process(
  COMMAND "${PROTOC}" "--plugin=protoc-gen-homarpc=${PLUGIN}" "--homarpc_out=${WORK_DIR}"
          "-I${PROTO_DIR}" "-I${PROTOBUF_INCLUDE_DIR}" ${protos}
  WORKING_DIRECTORY "${PROTO_DIR}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "protoc with protoc-gen-homarpc failed (${rc}):\n${err}")
endif()

file(GLOB_RECURSE generated RELATIVE "${WORK_DIR}" "${WORK_DIR}/*")
list(SORT generated)

if(UPDATE)
  file(REMOVE_RECURSE "${GOLDEN_DIR}")
  foreach(f IN LISTS generated)
    get_filename_component(dir "${GOLDEN_DIR}/${f}" DIRECTORY)
    file(COPY "${WORK_DIR}/${f}" DESTINATION "${dir}")
  endforeach()
  list(LENGTH generated n)
  message(STATUS "codegen golden files updated: ${n} files in ${GOLDEN_DIR}")
  return()
endif()

file(GLOB_RECURSE golden RELATIVE "${GOLDEN_DIR}" "${GOLDEN_DIR}/*")
list(SORT golden)
set(failures "")
foreach(f IN LISTS golden)
  if(NOT f IN_LIST generated)
    string(APPEND failures "missing: the plugin no longer writes ${f}\n")
  endif()
endforeach()
find_program(DIFF diff)
foreach(f IN LISTS generated)
  if(NOT f IN_LIST golden)
    string(APPEND failures "extra: the plugin writes ${f}, which has no golden copy\n")
    continue()
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${GOLDEN_DIR}/${f}" "${WORK_DIR}/${f}"
                  RESULT_VARIABLE different)
  if(different)
    string(APPEND failures "differs: ${f}\n")
    if(DIFF)  # straight to the test's output: message() would reflow the diff
      execute_process(COMMAND "${DIFF}" -u "${GOLDEN_DIR}/${f}" "${WORK_DIR}/${f}")
    endif()
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "generated code differs from tests/codegen/golden/:\n${failures}\n"
    "If the change is intended, regenerate the golden files (ninja codegen_update_golden) "
    "and review the diff.")
endif()
list(LENGTH generated n)
message(STATUS "codegen golden files: ${n} files match")

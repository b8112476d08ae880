# protoc-gen-homarpc's errors (run by ctest as codegen_plugin_errors): each bad input makes
# protoc fail with a clear one-line message.
#
# Inputs (-D): PROTOC, PLUGIN, ERROR_PROTO_DIR, WORK_DIR.
cmake_minimum_required(VERSION 3.20)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures "")

# expect_error(<proto> <regex> [extra protoc args...])
function(expect_error proto regex)
  execute_process(
    COMMAND "${PROTOC}" "--plugin=protoc-gen-homarpc=${PLUGIN}" ${ARGN}
            "-I${ERROR_PROTO_DIR}" "${proto}"
    WORKING_DIRECTORY "${ERROR_PROTO_DIR}"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(rc EQUAL 0)
    set(failures "${failures}${proto} ${ARGN}: protoc succeeded, expected an error\n"
        PARENT_SCOPE)
  elseif(NOT err MATCHES "${regex}")
    set(failures "${failures}${proto} ${ARGN}: error does not match '${regex}':\n${err}\n"
        PARENT_SCOPE)
  else()
    string(STRIP "${err}" err)
    message(STATUS "as expected: ${err}")
  endif()
endfunction()

# Options: none exist; any is rejected, whichever way protoc passes it.
expect_error(valid.proto "--homarpc_out: valid.proto: unknown option 'bogus' \\(protoc-gen-homarpc takes no options"
             "--homarpc_out=${WORK_DIR}" "--homarpc_opt=bogus")
expect_error(valid.proto "unknown option 'lite'"
             "--homarpc_out=lite=true:${WORK_DIR}")
# Two C++ names that escaping makes equal.
expect_error(name_collision.proto
             "--homarpc_out: name_collision.proto: rpc clash.Svc.async and rpc clash.Svc.async_ both become the C\\+\\+ name 'async_'"
             "--homarpc_out=${WORK_DIR}")
expect_error(service_collision.proto "both become the C\\+\\+ name 'Stub_'"
             "--homarpc_out=${WORK_DIR}")
# protobuf's own generic services would take the class names.
expect_error(generic_services.proto "--homarpc_out: generic_services.proto: option cc_generic_services = true"
             "--homarpc_out=${WORK_DIR}")

# ...and a valid file with no option still works.
execute_process(
  COMMAND "${PROTOC}" "--plugin=protoc-gen-homarpc=${PLUGIN}" "--homarpc_out=${WORK_DIR}"
          "-I${ERROR_PROTO_DIR}" valid.proto
  WORKING_DIRECTORY "${ERROR_PROTO_DIR}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS "${WORK_DIR}/valid.homarpc.pb.h")
  string(APPEND failures "valid.proto without options failed (${rc}): ${err}\n")
endif()

if(failures)
  message(FATAL_ERROR "${failures}")
endif()

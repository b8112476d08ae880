# ctest install_and_find_package: the installed package works for an outside project.
#
# 1. cmake --install HOMARPC_BUILD_DIR into WORK_DIR/prefix (a fresh prefix each run);
# 2. configure SOURCE_DIR (outside_project/) with only that prefix on CMAKE_PREFIX_PATH, so
#    find_package(homarpc CONFIG) and homarpc_add_proto_library() come from the install;
# 3. build it and run the program.
#
# Inputs (-D): HOMARPC_BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, CXX_COMPILER, CXX_FLAGS,
# BUILD_TYPE.
cmake_minimum_required(VERSION 3.20)

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${step}: ok")
endfunction()

run("cmake --install" "${CMAKE_COMMAND}" --install "${HOMARPC_BUILD_DIR}" --prefix "${prefix}")
foreach(f include/homarpc/homarpc.h include/homarpc/runtime/channel.h
          include/homarpc/transport/buffer.h bin/protoc-gen-homarpc
          lib/cmake/homarpc/homarpcConfig.cmake lib/cmake/homarpc/HomarpcProto.cmake)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()

run("configure outside_project" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${build}"
    -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
    "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF")
run("build outside_project" "${CMAKE_COMMAND}" --build "${build}" -j 1)
run("run outside_project" "${build}/outside_greeter")

# Install and export rules: `cmake --install build --prefix P` gives an outside project
#
#   find_package(homarpc CONFIG REQUIRED)        # with P on CMAKE_PREFIX_PATH
#   homarpc_add_proto_library(greeter_proto PROTOS greeter.proto)
#   target_link_libraries(app PRIVATE greeter_proto)   # brings homarpc::runtime
#
# Layout under P:
#   include/homarpc/homarpc.h                    <homarpc/homarpc.h>
#   include/homarpc/runtime/*.h, transport/*.h   as the tree includes them ("runtime/x.h")
#   lib/libhomarpc_{runtime,endpoint,engine,io,wire,base}.a
#   bin/protoc-gen-homarpc
#   lib/cmake/homarpc/   homarpcConfig.cmake (+Version), homarpcTargets*.cmake,
#                        HomarpcProto.cmake (homarpc_add_proto_library)
# P/include and P/include/homarpc are both on the exported include path, so the installed
# headers keep the in-tree spellings. Exported names: homarpc::runtime, homarpc::endpoint,
# homarpc::engine, homarpc::io, homarpc::wire, homarpc::base, homarpc::protoc-gen-homarpc;
# the same names are aliases in this tree, so homarpc_add_proto_library() reads the same in
# both places.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(homarpc_installed_libraries
  homarpc_runtime homarpc_endpoint homarpc_engine homarpc_io homarpc_wire homarpc_base)
foreach(lib IN LISTS homarpc_installed_libraries)
  string(REGEX REPLACE "^homarpc_" "" export_name "${lib}")
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
  add_library(homarpc::${export_name} ALIAS ${lib})
endforeach()
add_executable(homarpc::protoc-gen-homarpc ALIAS protoc-gen-homarpc)
# The public headers use C++17 and later; users get the standard with the target.
target_compile_features(homarpc_runtime PUBLIC cxx_std_20)

install(TARGETS ${homarpc_installed_libraries}
  EXPORT homarpcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_INCLUDEDIR}/homarpc)
install(TARGETS protoc-gen-homarpc
  EXPORT homarpcTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers. All of transport/'s, not just those runtime/'s headers include today: a header
# missing from the install breaks every user, an extra one costs nothing.
file(GLOB homarpc_runtime_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/runtime/*.h)
file(GLOB homarpc_transport_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/transport/*.h)
install(FILES ${homarpc_runtime_headers}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/homarpc/runtime)
install(FILES ${homarpc_transport_headers}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/homarpc/transport)
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/homarpc/homarpc.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/homarpc)

# The package.
set(homarpc_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/homarpc)
install(EXPORT homarpcTargets
  NAMESPACE homarpc::
  DESTINATION ${homarpc_cmake_dir})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/homarpcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/homarpcConfig.cmake
  INSTALL_DESTINATION ${homarpc_cmake_dir})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/homarpcConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/homarpcConfig.cmake
  ${PROJECT_BINARY_DIR}/homarpcConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/HomarpcProto.cmake
  DESTINATION ${homarpc_cmake_dir})

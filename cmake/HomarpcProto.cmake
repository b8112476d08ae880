# homarpc_add_proto_library(): .proto files -> a static library with their protobuf messages
# and homarpc services and stubs, in one line.
#
#   homarpc_add_proto_library(<target>
#     PROTOS a.proto sub/dir/b.proto ...   # relative to the current source dir, or absolute
#     [IMPORT_DIRS dir ...]                # protoc's -I roots; default: the current source dir
#     [OUT_DIR dir])                       # default: ${CMAKE_CURRENT_BINARY_DIR}/<target>_protos
#
# For each .proto, protoc runs with --cpp_out and --homarpc_out (protoc-gen-homarpc) and
# writes name.pb.h/.cc and name.homarpc.pb.h/.cc under OUT_DIR, at the .proto's path relative
# to its import root (the first IMPORT_DIRS entry that contains it; a .proto outside every
# IMPORT_DIRS entry is its own directory's root). So code includes "greeter.homarpc.pb.h",
# or "sub/dir/b.homarpc.pb.h", exactly as protoc lays the files out. <target> links
# homarpc::runtime and protobuf::libprotobuf and puts OUT_DIR on its PUBLIC include path.
# Imports of the well-known types (google/protobuf/*.proto) resolve through protobuf's
# include directory. protoc reruns when a .proto, anything it imports, or the plugin changes.
#
# A .proto importing one from another homarpc_add_proto_library() target: add that target's
# proto root to IMPORT_DIRS and target_link_libraries(<target> PUBLIC <other target>).
#
# Works in the homarpc tree (the plugin and runtime targets are built first) and in projects
# that use an installed homarpc through find_package(homarpc CONFIG), which includes this
# file: both define homarpc::protoc-gen-homarpc and homarpc::runtime.
include_guard(GLOBAL)
if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "homarpc_add_proto_library() needs CMake 3.20 or newer (DEPFILE)")
endif()

function(homarpc_add_proto_library target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUT_DIR" "PROTOS;IMPORT_DIRS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
      "homarpc_add_proto_library(${target}): unexpected arguments: ${arg_UNPARSED_ARGUMENTS}"
      " (expected PROTOS, IMPORT_DIRS, OUT_DIR)")
  endif()
  if(NOT arg_PROTOS)
    message(FATAL_ERROR "homarpc_add_proto_library(${target}): PROTOS names no .proto file")
  endif()

  if(TARGET protobuf::protoc)
    set(protoc "$<TARGET_FILE:protobuf::protoc>")
  elseif(Protobuf_PROTOC_EXECUTABLE)
    set(protoc "${Protobuf_PROTOC_EXECUTABLE}")
  else()
    message(FATAL_ERROR
      "homarpc_add_proto_library(${target}): protoc not found (find_package(Protobuf) first)")
  endif()
  if(NOT TARGET homarpc::protoc-gen-homarpc OR NOT TARGET homarpc::runtime)
    message(FATAL_ERROR "homarpc_add_proto_library(${target}): homarpc::protoc-gen-homarpc "
      "and homarpc::runtime are not defined (find_package(homarpc CONFIG) first)")
  endif()

  if(arg_OUT_DIR)
    get_filename_component(out_dir "${arg_OUT_DIR}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}_protos")
  endif()
  set(import_dirs "")
  if(NOT arg_IMPORT_DIRS)
    set(arg_IMPORT_DIRS "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()
  foreach(dir IN LISTS arg_IMPORT_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND import_dirs "${dir}")
  endforeach()

  # Each .proto's path relative to its import root.
  set(rel_protos "")
  set(abs_protos "")
  foreach(proto IN LISTS arg_PROTOS)
    get_filename_component(abs "${proto}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    set(rel "")
    foreach(dir IN LISTS import_dirs)
      file(RELATIVE_PATH candidate "${dir}" "${abs}")
      if(NOT candidate MATCHES "^\\.\\./" AND NOT IS_ABSOLUTE "${candidate}")
        set(rel "${candidate}")
        break()
      endif()
    endforeach()
    if(rel STREQUAL "")
      get_filename_component(own_dir "${abs}" DIRECTORY)
      get_filename_component(rel "${abs}" NAME)
      list(APPEND import_dirs "${own_dir}")
    endif()
    list(APPEND rel_protos "${rel}")
    list(APPEND abs_protos "${abs}")
  endforeach()
  list(REMOVE_DUPLICATES import_dirs)

  set(import_flags "")
  foreach(dir IN LISTS import_dirs)
    list(APPEND import_flags "-I${dir}")
  endforeach()
  # google/protobuf/*.proto, last so that a project's own files win.
  foreach(dir IN LISTS Protobuf_INCLUDE_DIRS)
    if(EXISTS "${dir}/google/protobuf/descriptor.proto")
      list(APPEND import_flags "-I${dir}")
      break()
    endif()
  endforeach()

  set(sources "")
  set(headers "")
  set(plugin "$<TARGET_FILE:homarpc::protoc-gen-homarpc>")
  foreach(abs rel IN ZIP_LISTS abs_protos rel_protos)
    string(REGEX REPLACE "\\.proto$" "" base "${rel}")
    # In the order protoc's depfile names them (sorted): Ninja wants the first to match.
    set(outputs
      "${out_dir}/${base}.homarpc.pb.cc" "${out_dir}/${base}.homarpc.pb.h"
      "${out_dir}/${base}.pb.cc" "${out_dir}/${base}.pb.h")
    string(MAKE_C_IDENTIFIER "${rel}" depname)
    set(depfile "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${target}.dir/${depname}.d")
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory "${out_dir}"
      COMMAND ${protoc} "--plugin=protoc-gen-homarpc=${plugin}" "--cpp_out=${out_dir}"
              "--homarpc_out=${out_dir}" "--dependency_out=${depfile}" ${import_flags} "${abs}"
      DEPENDS "${abs}" homarpc::protoc-gen-homarpc
      DEPFILE "${depfile}"
      WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
      COMMENT "protoc-gen-homarpc: ${rel} -> ${base}.pb.h, ${base}.homarpc.pb.h"
      VERBATIM)
    list(APPEND sources "${out_dir}/${base}.pb.cc" "${out_dir}/${base}.homarpc.pb.cc")
    list(APPEND headers "${out_dir}/${base}.pb.h" "${out_dir}/${base}.homarpc.pb.h")
  endforeach()

  add_library(${target} STATIC ${sources} ${headers})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${out_dir}>")
  target_link_libraries(${target} PUBLIC homarpc::runtime protobuf::libprotobuf)
endfunction()

# migrate.cmake: the whole gRPC -> homarpc source migration, as a build step.
#
#   cmake -DIN=kv_server.cc -DOUT=<build>/homarpc/kv_server.cc -P migrate.cmake
#
# Applies exactly the three replacements of docs/migrating-from-grpc.md and nothing else:
#   <grpcpp/grpcpp.h> -> <homarpc/homarpc.h>,  grpc:: -> homarpc::,  .grpc.pb.h -> .homarpc.pb.h
# and fails if the result still names a gRPC header (the promise covers programs that include
# <grpcpp/grpcpp.h> only).
file(READ "${IN}" text)
string(REPLACE "<grpcpp/grpcpp.h>" "<homarpc/homarpc.h>" text "${text}")
string(REPLACE "grpc::" "homarpc::" text "${text}")
string(REPLACE ".grpc.pb.h" ".homarpc.pb.h" text "${text}")
if(text MATCHES "grpcpp/")
  message(FATAL_ERROR "${IN} includes a gRPC header other than <grpcpp/grpcpp.h>")
endif()
file(WRITE "${OUT}" "${text}")

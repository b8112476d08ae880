// The code of one service: its class in name.homarpc.pb.h and the definitions in
// name.homarpc.pb.cc.
//
// Per service `Svc` (names as gRPC 1.51's grpc_cpp_plugin writes them):
//   Svc::service_full_name()           "package.Svc"
//   Svc::StubInterface                 pure virtual blocking calls, plus async_interface
//   Svc::Stub, Svc::NewStub(channel)   blocking Method(ctx, const Req&, Resp*) and
//                                      async()->Method(ctx, const Req*, Resp*,
//                                      function<void(Status)>)
//   Svc::Service                       virtual Status Method(ServerContext*, const Req*, Resp*)
//   Svc::CallbackService               virtual ServerUnaryReactor* Method(CallbackServerContext*,
//   ...)
// Both service classes register every method with ::homarpc::Service::AddMethod; streaming
// methods get a null handler (the server answers UNIMPLEMENTED) and no C++ method.
// The caller has opened the namespace of the file's package. Pure functions of the descriptor.
#ifndef HOMARPC_CODEGEN_SERVICE_EMITTER_H_
#define HOMARPC_CODEGEN_SERVICE_EMITTER_H_

#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/printer.h"

namespace homarpc::codegen {

void EmitServiceDeclaration(const google::protobuf::ServiceDescriptor* service,
                            google::protobuf::io::Printer* printer);
void EmitServiceDefinitions(const google::protobuf::ServiceDescriptor* service,
                            google::protobuf::io::Printer* printer);

}  // namespace homarpc::codegen

#endif  // HOMARPC_CODEGEN_SERVICE_EMITTER_H_

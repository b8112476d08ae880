// protoc-gen-homarpc: the protoc plugin that writes homarpc services and stubs.
//
//   protoc --plugin=protoc-gen-homarpc=path/to/protoc-gen-homarpc
//          --cpp_out=OUT --homarpc_out=OUT -I ROOT ROOT/greeter.proto   (one command)
//
// protoc runs it once per invocation, talks to it over stdin/stdout (CodeGeneratorRequest /
// CodeGeneratorResponse) and writes the files it returns. See generator.h.
#include "codegen/generator.h"
#include "google/protobuf/compiler/plugin.h"
#include "google/protobuf/stubs/common.h"

int main(int argc, char* argv[]) {
  homarpc::codegen::HomarpcGenerator generator;
  int status = google::protobuf::compiler::PluginMain(argc, argv, &generator);
  // Frees protobuf's global descriptor tables, so leak checkers (ASan builds) stay quiet.
  google::protobuf::ShutdownProtobufLibrary();
  return status;
}

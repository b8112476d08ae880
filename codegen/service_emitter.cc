// The generated code of one service (service_emitter.h).
//
// The shapes follow grpc_cpp_plugin 1.51 wherever homarpc offers the same thing, so that a
// gRPC program keeps compiling after `grpc::` -> `homarpc::`: same class and member names,
// same parameter order, `class async* async()`, `experimental_async()`, the
// ExperimentalCallbackService typedef. What gRPC generates and homarpc does not support yet
// (completion-queue AsyncService, the WithXxxMethod mixins, raw/generic methods, streaming
// calls) is left out rather than stubbed: a program that uses it fails to compile at the
// use, which says more than a runtime error would.
//
// Calls go through ::homarpc::Channel's BlockingUnaryCall/AsyncUnaryCall with the method's
// RpcMethod; servers get one handler object per method (runtime/service.h) that calls the
// virtual. Everything is fully qualified (::homarpc::, ::pkg::Msg) so that no name from the
// .proto can capture a name the generated code uses.
#include "codegen/service_emitter.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/comments.h"
#include "codegen/names.h"

namespace homarpc::codegen {

namespace {

namespace pb = google::protobuf;
using Vars = std::map<std::string, std::string>;

Vars MethodVars(const pb::MethodDescriptor* method, int index) {
  return {
      {"Service", ServiceClassName(method->service())},
      {"Method", MethodName(method)},
      {"ProtoMethod", method->name()},
      {"Request", MessageType(method->input_type())},
      {"Response", MessageType(method->output_type())},
      {"full_name", FullMethodName(method)},
      {"index", absl::StrCat(index)},
      {"RpcType", RpcTypeName(method)},
      {"kind", RpcKindText(method)},
  };
}

void PrintLines(const std::vector<std::string>& lines, pb::io::Printer* printer) {
  // Through a variable: a comment may contain the printer's '$'.
  for (const std::string& line : lines) printer->Print("$line$\n", "line", line);
}

// The .proto comment of a method; for a streaming method, also why nothing is generated.
void PrintMethodComment(const pb::MethodDescriptor* method, pb::io::Printer* printer) {
  PrintLines(CommentLines(method), printer);
  if (IsStreaming(method)) {
    printer->Print(MethodVars(method, 0),
                   "// rpc $ProtoMethod$ ($kind$): not generated, homarpc does not support\n"
                   "// streaming yet (the server answers it UNIMPLEMENTED).\n");
  }
}

bool HasUnaryMethod(const pb::ServiceDescriptor* service) {
  for (int i = 0; i < service->method_count(); ++i) {
    if (!IsStreaming(service->method(i))) return true;
  }
  return false;
}

void EmitStubInterface(const pb::ServiceDescriptor* service, pb::io::Printer* printer) {
  printer->Print(
      "class StubInterface {\n"
      " public:\n");
  printer->Indent();
  printer->Print("virtual ~StubInterface() {}\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    PrintMethodComment(method, printer);
    if (IsStreaming(method)) continue;
    printer->Print(MethodVars(method, i),
                   "virtual ::homarpc::Status $Method$(::homarpc::ClientContext* context, "
                   "const $Request$& request, $Response$* response) = 0;\n");
  }
  printer->Print(
      "class async_interface {\n"
      " public:\n");
  printer->Indent();
  printer->Print("virtual ~async_interface() {}\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    PrintLines(CommentLines(method), printer);
    printer->Print(MethodVars(method, i),
                   "virtual void $Method$(::homarpc::ClientContext* context, "
                   "const $Request$* request, $Response$* response, "
                   "std::function<void(::homarpc::Status)>) = 0;\n");
  }
  printer->Outdent();
  // async() is not pure, as in gRPC: a hand-written mock of StubInterface that only mocks
  // the blocking calls stays instantiable.
  printer->Print(
      "};\n"
      "typedef class async_interface experimental_async_interface;\n"
      "virtual class async_interface* async() { return nullptr; }\n"
      "class async_interface* experimental_async() { return async(); }\n");
  printer->Outdent();
  printer->Print("};\n");
}

void EmitStub(const pb::ServiceDescriptor* service, pb::io::Printer* printer) {
  printer->Print(
      "class Stub final : public StubInterface {\n"
      " public:\n");
  printer->Indent();
  printer->Print(
      "Stub(const std::shared_ptr< ::homarpc::ChannelInterface>& channel, "
      "const ::homarpc::StubOptions& options = ::homarpc::StubOptions());\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    printer->Print(MethodVars(method, i),
                   "::homarpc::Status $Method$(::homarpc::ClientContext* context, "
                   "const $Request$& request, $Response$* response) override;\n");
  }
  printer->Print(
      "class async final : public StubInterface::async_interface {\n"
      " public:\n");
  printer->Indent();
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    printer->Print(MethodVars(method, i),
                   "void $Method$(::homarpc::ClientContext* context, const $Request$* request, "
                   "$Response$* response, std::function<void(::homarpc::Status)>) override;\n");
  }
  printer->Outdent();
  printer->Print(
      " private:\n"
      "  friend class Stub;\n"
      "  explicit async(Stub* stub) : stub_(stub) {}\n");
  // Without a unary method nothing reads stub_ (clang's -Wunused-private-field).
  printer->Print(HasUnaryMethod(service) ? "  Stub* stub_;\n"
                                         : "  [[maybe_unused]] Stub* stub_;\n");
  printer->Print(
      "};\n"
      "class async* async() override { return &async_stub_; }\n");
  printer->Outdent();
  printer->Print(
      "\n"
      " private:\n");
  printer->Indent();
  printer->Print(
      "std::shared_ptr< ::homarpc::ChannelInterface> channel_;\n"
      "class async async_stub_{this};\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    printer->Print(MethodVars(method, i),
                   "const ::homarpc::internal::RpcMethod rpcmethod_$Method$_;\n");
  }
  printer->Outdent();
  printer->Print("};\n");
}

// Service (sync) or CallbackService.
void EmitServiceBase(const pb::ServiceDescriptor* service, bool callback,
                     pb::io::Printer* printer) {
  Vars vars = {{"Class", callback ? "CallbackService" : "Service"}};
  printer->Print(vars,
                 "class $Class$ : public ::homarpc::Service {\n"
                 " public:\n");
  printer->Indent();
  printer->Print(vars,
                 "$Class$();\n"
                 "~$Class$() override;\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    PrintMethodComment(method, printer);
    if (IsStreaming(method)) continue;
    printer->Print(MethodVars(method, i),
                   callback
                       ? "virtual ::homarpc::ServerUnaryReactor* $Method$("
                         "::homarpc::CallbackServerContext* context, "
                         "const $Request$* request, $Response$* response);\n"
                       : "virtual ::homarpc::Status $Method$(::homarpc::ServerContext* context, "
                         "const $Request$* request, $Response$* response);\n");
  }
  printer->Outdent();
  printer->Print("};\n");
}

void EmitServiceBaseDefinitions(const pb::ServiceDescriptor* service, bool callback,
                                pb::io::Printer* printer) {
  Vars vars = {{"Service", ServiceClassName(service)},
               {"Class", callback ? "CallbackService" : "Service"}};
  if (service->method_count() == 0) {
    printer->Print(vars, "$Service$::$Class$::$Class$() {}\n");
  } else {
    printer->Print(vars, "$Service$::$Class$::$Class$() {\n");
    printer->Indent();
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* method = service->method(i);
      Vars mv = MethodVars(method, i);
      if (IsStreaming(method)) {
        printer->Print(mv,
                       "// $ProtoMethod$ ($kind$): no handler, callers get UNIMPLEMENTED.\n"
                       "::homarpc::Service::AddMethod($Service$_method_names[$index$], "
                       "$RpcType$, nullptr);\n");
        continue;
      }
      printer->Print(mv,
                     "::homarpc::Service::AddMethod(\n"
                     "    $Service$_method_names[$index$], $RpcType$,\n");
      printer->Print(
          mv, callback
                  ? "    std::make_unique< ::homarpc::internal::CallbackUnaryHandler< $Request$, "
                    "$Response$>>(\n"
                    "        [this](::homarpc::CallbackServerContext* context, "
                    "const $Request$* request, $Response$* response) {\n"
                  : "    std::make_unique< ::homarpc::internal::SyncUnaryHandler< $Request$, "
                    "$Response$>>(\n"
                    "        [this](::homarpc::ServerContext* context, "
                    "const $Request$* request, $Response$* response) {\n");
      printer->Print(mv,
                     "          return this->$Method$(context, request, response);\n"
                     "        }));\n");
    }
    printer->Outdent();
    printer->Print("}\n");
  }
  printer->Print(vars,
                 "\n"
                 "$Service$::$Class$::~$Class$() {}\n");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    Vars mv = MethodVars(method, i);
    mv["Class"] = vars["Class"];
    printer->Print("\n");
    if (callback) {
      printer->Print(mv,
                     "::homarpc::ServerUnaryReactor* $Service$::$Class$::$Method$("
                     "::homarpc::CallbackServerContext* context, "
                     "const $Request$* /*request*/, $Response$* /*response*/) {\n"
                     "  ::homarpc::ServerUnaryReactor* reactor = context->DefaultReactor();\n"
                     "  reactor->Finish(::homarpc::Status(::homarpc::StatusCode::UNIMPLEMENTED, "
                     "\"\"));\n"
                     "  return reactor;\n"
                     "}\n");
    } else {
      printer->Print(mv,
                     "::homarpc::Status $Service$::$Class$::$Method$("
                     "::homarpc::ServerContext* /*context*/, "
                     "const $Request$* /*request*/, $Response$* /*response*/) {\n"
                     "  return ::homarpc::Status(::homarpc::StatusCode::UNIMPLEMENTED, \"\");\n"
                     "}\n");
    }
  }
}

}  // namespace

void EmitServiceDeclaration(const pb::ServiceDescriptor* service, pb::io::Printer* printer) {
  Vars vars = {{"Service", ServiceClassName(service)}, {"full_name", service->full_name()}};
  PrintLines(CommentLines(service), printer);
  printer->Print(vars,
                 "class $Service$ final {\n"
                 " public:\n");
  printer->Indent();
  printer->Print(vars,
                 "static constexpr char const* service_full_name() { return \"$full_name$\"; }\n");
  EmitStubInterface(service, printer);
  EmitStub(service, printer);
  printer->Print(
      "static std::unique_ptr<Stub> NewStub(const std::shared_ptr< ::homarpc::ChannelInterface>& "
      "channel, const ::homarpc::StubOptions& options = ::homarpc::StubOptions());\n"
      "\n");
  EmitServiceBase(service, /*callback=*/false, printer);
  EmitServiceBase(service, /*callback=*/true, printer);
  printer->Print("typedef CallbackService ExperimentalCallbackService;\n");
  printer->Outdent();
  printer->Print("};\n");
}

void EmitServiceDefinitions(const pb::ServiceDescriptor* service, pb::io::Printer* printer) {
  Vars vars = {{"Service", ServiceClassName(service)}};
  if (service->method_count() > 0) {
    printer->Print(vars, "static const char* const $Service$_method_names[] = {\n");
    for (int i = 0; i < service->method_count(); ++i) {
      printer->Print(MethodVars(service->method(i), i), "    \"$full_name$\",\n");
    }
    printer->Print("};\n\n");
  }

  printer->Print(
      vars,
      "std::unique_ptr<$Service$::Stub> $Service$::NewStub("
      "const std::shared_ptr< ::homarpc::ChannelInterface>& channel, "
      "const ::homarpc::StubOptions& options) {\n"
      "  return std::make_unique<$Service$::Stub>(channel, options);\n"
      "}\n"
      "\n"
      "$Service$::Stub::Stub(const std::shared_ptr< ::homarpc::ChannelInterface>& channel, "
      "const ::homarpc::StubOptions& /*options*/)\n"
      "    : channel_(channel)");
  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    printer->Print(MethodVars(method, i),
                   ",\n"
                   "      rpcmethod_$Method$_{$Service$_method_names[$index$], $RpcType$}");
  }
  printer->Print(" {}\n");

  for (int i = 0; i < service->method_count(); ++i) {
    const pb::MethodDescriptor* method = service->method(i);
    if (IsStreaming(method)) continue;
    printer->Print(
        MethodVars(method, i),
        "\n"
        "::homarpc::Status $Service$::Stub::$Method$(::homarpc::ClientContext* context, "
        "const $Request$& request, $Response$* response) {\n"
        "  return channel_->BlockingUnaryCall(rpcmethod_$Method$_, context, request, response);\n"
        "}\n"
        "\n"
        "void $Service$::Stub::async::$Method$(::homarpc::ClientContext* context, "
        "const $Request$* request, $Response$* response, "
        "std::function<void(::homarpc::Status)> on_done) {\n"
        "  stub_->channel_->AsyncUnaryCall(stub_->rpcmethod_$Method$_, context, request, "
        "response, std::move(on_done));\n"
        "}\n");
  }
  printer->Print("\n");
  EmitServiceBaseDefinitions(service, /*callback=*/false, printer);
  printer->Print("\n");
  EmitServiceBaseDefinitions(service, /*callback=*/true, printer);
}

}  // namespace homarpc::codegen

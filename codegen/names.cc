// C++ names for generated code (names.h).
#include "codegen/names.h"

#include <cctype>
#include <cstdio>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/compiler/cpp/names.h"

namespace homarpc::codegen {

namespace {

namespace pb = google::protobuf;

// The same list protobuf's C++ generator escapes (compiler/cpp/helpers.cc), plus the C++20
// keywords it does not know yet.
// clang-format off
const absl::flat_hash_set<std::string>& Keywords() {
  static const auto* const kKeywords = new absl::flat_hash_set<std::string>{
      "NULL",          "alignas",      "alignof",   "and",          "and_eq",
      "asm",           "auto",         "bitand",    "bitor",        "bool",
      "break",         "case",         "catch",     "char",         "char8_t",
      "char16_t",      "char32_t",     "class",     "co_await",     "co_return",
      "co_yield",      "compl",        "concept",   "const",        "consteval",
      "constexpr",     "constinit",    "const_cast", "continue",    "decltype",
      "default",       "delete",       "do",        "double",       "dynamic_cast",
      "else",          "enum",         "explicit",  "export",       "extern",
      "false",         "float",        "for",       "friend",       "goto",
      "if",            "inline",       "int",       "long",         "mutable",
      "namespace",     "new",          "noexcept",  "not",          "not_eq",
      "nullptr",       "operator",     "or",        "or_eq",        "private",
      "protected",     "public",       "register",  "reinterpret_cast", "requires",
      "return",        "short",        "signed",    "sizeof",       "static",
      "static_assert", "static_cast",  "struct",    "switch",       "template",
      "this",          "thread_local", "throw",     "true",         "try",
      "typedef",       "typeid",       "typename",  "union",        "unsigned",
      "using",         "virtual",      "void",      "volatile",     "wchar_t",
      "while",         "xor",          "xor_eq",
  };
  return *kKeywords;
}
// clang-format on

// Members of the generated service class: a service of that name would declare a member
// with its own name (ill-formed).
const absl::flat_hash_set<std::string>& ReservedServiceNames() {
  static const auto* const kNames = new absl::flat_hash_set<std::string>{
      "Stub",
      "StubInterface",
      "Service",
      "CallbackService",
      "NewStub",
      "service_full_name",
      "ExperimentalCallbackService",
  };
  return *kNames;
}

// Names declared in the classes that hold one member per method (StubInterface,
// async_interface, Stub, Stub::async, Service, CallbackService): a method of that name would
// collide with them or hide them.
const absl::flat_hash_set<std::string>& ReservedMethodNames() {
  static const auto* const kNames = new absl::flat_hash_set<std::string>{
      "Stub",
      "StubInterface",
      "Service",
      "CallbackService",
      "async",
      "async_interface",
      "experimental_async",
      "experimental_async_interface",
      "channel_",
      "async_stub_",
      "stub_",
  };
  return *kNames;
}

std::string Escape(const std::string& name, const absl::flat_hash_set<std::string>& reserved) {
  if (IsCppKeyword(name) || reserved.contains(name)) return name + "_";
  return name;
}

}  // namespace

bool IsCppKeyword(const std::string& name) { return Keywords().contains(name); }

std::string ServiceClassName(const pb::ServiceDescriptor* service) {
  return Escape(service->name(), ReservedServiceNames());
}

std::string MethodName(const pb::MethodDescriptor* method) {
  return Escape(method->name(), ReservedMethodNames());
}

std::string FullMethodName(const pb::MethodDescriptor* method) {
  return absl::StrCat("/", method->service()->full_name(), "/", method->name());
}

std::string MessageType(const pb::Descriptor* message) {
  return pb::compiler::cpp::QualifiedClassName(message);
}

std::vector<std::string> NamespaceParts(const pb::FileDescriptor* file) {
  if (file->package().empty()) return {};
  return absl::StrSplit(file->package(), '.');
}

std::string FileBase(const pb::FileDescriptor* file) {
  return pb::compiler::cpp::StripProto(file->name());
}

std::string IncludeGuard(const pb::FileDescriptor* file) {
  std::string guard = "HOMARPC_";
  for (unsigned char c : file->name()) {
    if (std::isalnum(c) || c == '_') {
      guard.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "_%02x", c);
      guard += hex;
    }
  }
  return guard + "_INCLUDED";
}

bool IsStreaming(const pb::MethodDescriptor* method) {
  return method->client_streaming() || method->server_streaming();
}

std::string RpcTypeName(const pb::MethodDescriptor* method) {
  const char* type = "NORMAL_RPC";
  if (method->client_streaming() && method->server_streaming()) {
    type = "BIDI_STREAMING";
  } else if (method->client_streaming()) {
    type = "CLIENT_STREAMING";
  } else if (method->server_streaming()) {
    type = "SERVER_STREAMING";
  }
  return absl::StrCat("::homarpc::internal::RpcType::", type);
}

std::string RpcKindText(const pb::MethodDescriptor* method) {
  if (method->client_streaming() && method->server_streaming()) return "bidirectional streaming";
  if (method->client_streaming()) return "client streaming";
  if (method->server_streaming()) return "server streaming";
  return "unary";
}

}  // namespace homarpc::codegen

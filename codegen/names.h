// C++ names for what protoc-gen-homarpc emits: classes, methods, namespaces, file names and
// the wire names of methods ("/package.Service/Method").
//
// Message types are named exactly as protobuf's C++ generator names them
// (compiler/cpp/names.h: nested Outer.Inner -> ::pkg::Outer_Inner, keywords get "_").
// Services and methods follow the same convention: a name that is a C++ keyword, or that
// would collide with a name the generated class itself declares (Stub, Service, async...),
// gets one "_" appended in C++ ("class" -> "class_"). The wire names never change.
// Pure functions; used by one protoc run on one thread.
#ifndef HOMARPC_CODEGEN_NAMES_H_
#define HOMARPC_CODEGEN_NAMES_H_

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace homarpc::codegen {

// True for C++20 keywords and the alternative tokens (and, or, ...), plus NULL, as protobuf
// treats them.
bool IsCppKeyword(const std::string& name);

// The C++ class generated for a service: its name, escaped as described above.
std::string ServiceClassName(const google::protobuf::ServiceDescriptor* service);
// The C++ member name of a method in the generated Stub/Service classes.
std::string MethodName(const google::protobuf::MethodDescriptor* method);
// "/package.Service/Method" ("/Service/Method" without a package): what goes on the wire.
std::string FullMethodName(const google::protobuf::MethodDescriptor* method);

// Fully qualified C++ type of a message, as protobuf generates it: "::pkg::Outer_Inner".
std::string MessageType(const google::protobuf::Descriptor* message);

// The C++ namespaces of a file's package, outermost first ({"a", "b", "c"} for a.b.c; empty
// without a package). Protobuf does not escape these, so neither do we.
std::vector<std::string> NamespaceParts(const google::protobuf::FileDescriptor* file);

// The file's name without ".proto", relative to its import root: "sub/dir/x".
std::string FileBase(const google::protobuf::FileDescriptor* file);
// The include guard of the generated header: HOMARPC_ + the file name with every character
// other than [A-Za-z0-9_] written as _XX (hex), as protobuf's own guards are built.
std::string IncludeGuard(const google::protobuf::FileDescriptor* file);

bool IsStreaming(const google::protobuf::MethodDescriptor* method);
// "::homarpc::internal::RpcType::NORMAL_RPC" etc.
std::string RpcTypeName(const google::protobuf::MethodDescriptor* method);
// "unary", "client streaming", "server streaming", "bidirectional streaming".
std::string RpcKindText(const google::protobuf::MethodDescriptor* method);

}  // namespace homarpc::codegen

#endif  // HOMARPC_CODEGEN_NAMES_H_

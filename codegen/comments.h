// The .proto comments of services and methods, turned into C++ "//" comment lines.
//
// protoc hands plugins the comments of the files it asks them to generate (SourceCodeInfo).
// For each element we copy, in source order: the detached comment blocks above it, its
// leading comment, and its trailing comment, separated by an empty "//" line. Pure functions.
#ifndef HOMARPC_CODEGEN_COMMENTS_H_
#define HOMARPC_CODEGEN_COMMENTS_H_

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace homarpc::codegen {

// The comment lines (each starting with "//", no newline) for a service or a method; empty
// when the .proto has none.
std::vector<std::string> CommentLines(const google::protobuf::ServiceDescriptor* service);
std::vector<std::string> CommentLines(const google::protobuf::MethodDescriptor* method);

// The lines of one comment text as protoc gives it (" Sends a greeting\n") as "//" lines:
// trailing whitespace removed, and a line that would end in a backslash (which would splice
// the next source line into the comment) closed with " //".
std::vector<std::string> FormatComment(const std::string& text);

}  // namespace homarpc::codegen

#endif  // HOMARPC_CODEGEN_COMMENTS_H_

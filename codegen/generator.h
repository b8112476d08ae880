// HomarpcGenerator: protoc's CodeGenerator for `--homarpc_out`.
//
// For each .proto protoc asks about, writes `name.homarpc.pb.h` and `name.homarpc.pb.cc`
// beside protobuf's `name.pb.h` / `name.pb.cc` (same directory relative to the output root,
// so `#include "sub/dir/x.homarpc.pb.h"` works from the same include path). The header
// includes <homarpc/homarpc.h> and the file's own .pb.h, which brings in every imported
// message type. A file without services gives two near-empty files, so build rules can
// always list both outputs.
//
// Options (--homarpc_opt=...): none yet; any option is rejected with a one-line error, so a
// typo does not silently change nothing.
//
// Errors (protoc reports them as "--homarpc_out: name.proto: <message>", exit status 1):
//   - an option was given;
//   - two services of the file, or two methods of a service, get the same C++ name (after
//     keyword escaping, names.h);
//   - the file sets cc_generic_services, whose classes would take the service names.
//
// Stateless; protoc calls Generate() once per file, on one thread.
#ifndef HOMARPC_CODEGEN_GENERATOR_H_
#define HOMARPC_CODEGEN_GENERATOR_H_

#include <cstdint>
#include <string>

#include "google/protobuf/compiler/code_generator.h"
#include "google/protobuf/descriptor.h"

namespace homarpc::codegen {

class HomarpcGenerator final : public google::protobuf::compiler::CodeGenerator {
 public:
  bool Generate(const google::protobuf::FileDescriptor* file, const std::string& parameter,
                google::protobuf::compiler::GeneratorContext* context,
                std::string* error) const override;
  // proto3 `optional` fields only concern protobuf's own generator; we accept such files.
  uint64_t GetSupportedFeatures() const override { return FEATURE_PROTO3_OPTIONAL; }
};

}  // namespace homarpc::codegen

#endif  // HOMARPC_CODEGEN_GENERATOR_H_

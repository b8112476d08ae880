// .proto comments as C++ comment lines (comments.h).
#include "codegen/comments.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace homarpc::codegen {

namespace {

namespace pb = google::protobuf;

std::vector<std::string> FromLocation(const pb::SourceLocation& location) {
  std::vector<std::string> lines;
  auto append_block = [&lines](const std::string& text) {
    std::vector<std::string> block = FormatComment(text);
    if (block.empty()) return;
    if (!lines.empty()) lines.push_back("//");
    lines.insert(lines.end(), block.begin(), block.end());
  };
  for (const std::string& detached : location.leading_detached_comments) append_block(detached);
  append_block(location.leading_comments);
  append_block(location.trailing_comments);
  return lines;
}

template <typename Descriptor>
std::vector<std::string> LinesOf(const Descriptor* descriptor) {
  pb::SourceLocation location;
  if (!descriptor->GetSourceLocation(&location)) return {};
  return FromLocation(location);
}

}  // namespace

std::vector<std::string> CommentLines(const pb::ServiceDescriptor* service) {
  return LinesOf(service);
}

std::vector<std::string> CommentLines(const pb::MethodDescriptor* method) {
  return LinesOf(method);
}

std::vector<std::string> FormatComment(const std::string& text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    std::string out = line.empty() ? "//" : "//" + std::string(line);
    // A backslash at the end of a // comment continues it onto the next source line (it
    // would swallow the declaration that follows). Anything after it but whitespace stops
    // that; whitespace alone does not.
    if (out.back() == '\\') out += " //";
    lines.push_back(std::move(out));
  }
  // protoc's texts end in '\n': drop the empty lines that leaves at the end (and any blank
  // lines the author left there).
  while (!lines.empty() && lines.back() == "//") lines.pop_back();
  // ...and blank lines at the start.
  size_t first = 0;
  while (first < lines.size() && lines[first] == "//") ++first;
  lines.erase(lines.begin(), lines.begin() + first);
  return lines;
}

}  // namespace homarpc::codegen

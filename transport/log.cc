#include "transport/log.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace homarpc::log_internal {
namespace {

Level Threshold() {
  static const Level threshold = [] {
    const char* env = std::getenv("HOMARPC_LOG_LEVEL");
    if (env == nullptr) return Level::kWarning;
    if (std::strcmp(env, "info") == 0) return Level::kInfo;
    if (std::strcmp(env, "error") == 0) return Level::kError;
    return Level::kWarning;
  }();
  return threshold;
}

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

bool Enabled(Level level) { return level >= Threshold(); }

Line::Line(Level level, const char* file, int line) {
  static constexpr const char* kNames[] = {"I", "W", "E"};
  stream_ << kNames[static_cast<int>(level)] << " " << Basename(file) << ":" << line << "] ";
}

Line::~Line() {
  stream_ << "\n";
  std::string text = stream_.str();
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace homarpc::log_internal

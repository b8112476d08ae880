// log: the project's one small logging module (this Abseil release has no absl/log).
//
// HOMARPC_LOG(level) << ...; writes one line to stderr: "<level> <file>:<line>] message".
// Levels: INFO, WARNING, ERROR. The threshold comes from HOMARPC_LOG_LEVEL (info, warning,
// error; default warning) read once. Thread-safe: each line is written with one write(2).
#ifndef HOMARPC_TRANSPORT_LOG_H_
#define HOMARPC_TRANSPORT_LOG_H_

#include <sstream>

namespace homarpc::log_internal {

enum class Level { kInfo = 0, kWarning = 1, kError = 2 };
bool Enabled(Level level);

class Line {
 public:
  Line(Level level, const char* file, int line);
  ~Line();
  template <typename T>
  Line& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Turns the streamed expression into void so both branches of the ternary match.
struct Voidify {
  void operator&(const Line&) {}
};

}  // namespace homarpc::log_internal

#define HOMARPC_LOG_LEVEL_INFO ::homarpc::log_internal::Level::kInfo
#define HOMARPC_LOG_LEVEL_WARNING ::homarpc::log_internal::Level::kWarning
#define HOMARPC_LOG_LEVEL_ERROR ::homarpc::log_internal::Level::kError
// The ternary (not an if) keeps the macro safe inside an unbraced if/else.
#define HOMARPC_LOG(level)                                                \
  !::homarpc::log_internal::Enabled(HOMARPC_LOG_LEVEL_##level)            \
      ? (void)0                                                           \
      : ::homarpc::log_internal::Voidify() &                              \
            ::homarpc::log_internal::Line(HOMARPC_LOG_LEVEL_##level, __FILE__, __LINE__)

#endif  // HOMARPC_TRANSPORT_LOG_H_

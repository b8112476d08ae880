// Trace points: see trace_points.h.
#include "transport/trace_points.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "transport/clock.h"
#include "transport/errors.h"

namespace homarpc::transport {
namespace {

constexpr uint64_t kMagic = 0x31454341'52544850;  // "PHTRACE1", little-endian
// Larger than any CLOCK_MONOTONIC reading for 73 years of uptime, and small enough that
// differences of differences of such times (a step against its median) cannot overflow.
constexpr int64_t kMaxTraceNanos = int64_t{1} << 61;

// The file: this header, then kMaxTraceRecords records.
struct TraceHeader {
  uint64_t magic;
  std::atomic<uint64_t> next;  // records taken (may pass kMaxTraceRecords: those are dropped)
  std::atomic<uint64_t> dropped;
  uint64_t reserved;
};
static_assert(sizeof(TraceHeader) == 32);
constexpr size_t kFileBytes = sizeof(TraceHeader) + kMaxTraceRecords * sizeof(TraceRecord);

// This process's mapped file, or null when it does not record (no HOMARPC_TRACE_DIR, or the
// file could not be made: said once on stderr).
TraceHeader* OpenTraceFile() {
  const char* dir = std::getenv("HOMARPC_TRACE_DIR");
  if (dir == nullptr || *dir == '\0') return nullptr;
  const std::string path = absl::StrCat(dir, "/trace.", getpid());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(kFileBytes)) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    std::fprintf(stderr, "homarpc trace points: %s: %s; not recording\n", path.c_str(),
                 std::strerror(err));
    return nullptr;
  }
  void* p = mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "homarpc trace points: mmap %s: %s; not recording\n", path.c_str(),
                 std::strerror(err));
    return nullptr;
  }
  // Every page written now, not at its first stamp (a page fault would be timed as a step).
  auto* bytes = static_cast<volatile uint8_t*>(p);
  for (size_t at = 0; at < kFileBytes; at += 4096) bytes[at] = 0;
  auto* header = new (p) TraceHeader{kMagic, {0}, {0}, 0};
  return header;
}

uint32_t ThisThreadsId() {
  thread_local const uint32_t id = static_cast<uint32_t>(syscall(SYS_gettid));
  return id;
}

}  // namespace

void RecordTracePoint(TracePoint point) {
  static TraceHeader* const header = OpenTraceFile();
  if (header == nullptr) return;
  const uint64_t at = header->next.fetch_add(1, std::memory_order_relaxed);
  if (at >= kMaxTraceRecords) {
    header->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto* records = reinterpret_cast<TraceRecord*>(header + 1);
  records[at] = TraceRecord{MonotonicClock::Get()->NowNanos(), static_cast<uint32_t>(point),
                            ThisThreadsId()};
}

absl::StatusOr<TraceFile> ReadTraceFile(const std::string& path) {
  // Non-blocking, and only a regular file: a FIFO of that name must not hang the reader.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::DataLossError(path + ": not a regular file");
  }
  // Reads exactly `n` bytes at `offset`; false at the end of the file or on an error.
  auto read_at = [fd](void* to, size_t n, off_t offset) {
    auto* out = static_cast<char*>(to);
    while (n > 0) {
      const ssize_t got = pread(fd, out, n, offset);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      out += got;
      n -= static_cast<size_t>(got);
      offset += got;
    }
    return true;
  };
  struct {
    uint64_t magic, next, dropped, reserved;
  } header;
  static_assert(sizeof(header) == sizeof(TraceHeader));
  TraceFile file;
  absl::Status status;
  if (!read_at(&header, sizeof(header), 0)) {
    status = absl::DataLossError(path + ": shorter than a trace header");
  } else if (header.magic != kMagic) {
    status = absl::DataLossError(path + ": not a homarpc trace file");
  } else {
    const uint64_t count = std::min(header.next, kMaxTraceRecords);
    std::vector<TraceRecord> all;
    if (static_cast<uint64_t>(st.st_size) >= sizeof(header) + count * sizeof(TraceRecord)) {
      all.resize(count);  // only what the file holds: a header's claim allocates nothing
    }
    if (all.size() != count ||
        !read_at(all.data(), count * sizeof(TraceRecord), sizeof(header))) {
      status = absl::DataLossError(absl::StrCat(path, ": holds fewer than its ", count,
                                                " records"));
    } else {
      // A slot taken but never written (the process died between the two), a point this
      // reader does not know, or a time no monotonic clock shows (which differences of two
      // could overflow): skipped.
      for (const TraceRecord& r : all) {
        if (r.point != 0 && r.point <= kMaxTracePoint && r.nanos >= 0 &&
            r.nanos < kMaxTraceNanos) {
          file.records.push_back(r);
        }
      }
      file.dropped = header.dropped;
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return file;
}

}  // namespace homarpc::transport

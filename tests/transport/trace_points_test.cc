// Tests of the trace points' file (transport/trace_points.h): stamps of several threads read
// back in order; files that are not traces (missing, short, foreign, cut short, a FIFO) are
// refused without blocking, and records no clock could have made are skipped.
#include "transport/trace_points.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"

namespace homarpc::transport {
namespace {

using testing::HasSubstr;

std::string MakeTempDir() {
  char pattern[] = "/tmp/trace_points_test.XXXXXX";
  const char* dir = mkdtemp(pattern);
  return dir == nullptr ? std::string() : std::string(dir);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

// A header for `next` records, as RecordTracePoint writes it.
std::string Header(uint64_t next) {
  std::string header(32, '\0');
  const uint64_t magic = 0x31454341'52544850;
  header.replace(0, 8, reinterpret_cast<const char*>(&magic), 8);
  header.replace(8, 8, reinterpret_cast<const char*>(&next), 8);
  return header;
}

std::string Record(int64_t nanos, uint32_t point) {
  TraceRecord r{nanos, point, 7};
  return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
}

// The only test that records: the process opens its trace file at its first stamp, from the
// environment of that moment.
TEST(TracePointsTest, StampsOfSeveralThreadsReadBackInOrder) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  ASSERT_EQ(setenv("HOMARPC_TRACE_DIR", dir.c_str(), 1), 0);
  RecordTracePoint(TracePoint::kCallBegin);
  std::thread other([] { RecordTracePoint(TracePoint::kReceived); });
  other.join();
  RecordTracePoint(TracePoint::kCallEnd);

  const std::string path = absl::StrCat(dir, "/trace.", getpid());
  absl::StatusOr<TraceFile> file = ReadTraceFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->records.size(), 3u);
  EXPECT_EQ(file->dropped, 0u);
  EXPECT_EQ(file->records[0].point, static_cast<uint32_t>(TracePoint::kCallBegin));
  EXPECT_EQ(file->records[1].point, static_cast<uint32_t>(TracePoint::kReceived));
  EXPECT_EQ(file->records[2].point, static_cast<uint32_t>(TracePoint::kCallEnd));
  EXPECT_EQ(file->records[0].thread, file->records[2].thread);
  EXPECT_NE(file->records[0].thread, file->records[1].thread);
  EXPECT_LE(file->records[0].nanos, file->records[1].nanos);
  EXPECT_LE(file->records[1].nanos, file->records[2].nanos);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(TracePointsTest, FilesThatAreNotTracesAreRefused) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(ReadTraceFile(dir + "/none").status().code(), absl::StatusCode::kNotFound);
  WriteFile(dir + "/short", "PH");
  EXPECT_EQ(ReadTraceFile(dir + "/short").status().code(), absl::StatusCode::kDataLoss);
  WriteFile(dir + "/other", std::string(64, 'x'));
  EXPECT_EQ(ReadTraceFile(dir + "/other").status().code(), absl::StatusCode::kDataLoss);
  // A header that claims three records over a file that holds one.
  WriteFile(dir + "/cut", Header(3) + Record(1000, 1));
  absl::StatusOr<TraceFile> cut = ReadTraceFile(dir + "/cut");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr("fewer than its 3 records"));
  // A FIFO nobody writes to: refused at once, not waited on.
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(ReadTraceFile(dir + "/fifo").status().code(), absl::StatusCode::kDataLoss);
  for (const char* name : {"/short", "/other", "/cut", "/fifo"}) std::remove((dir + name).c_str());
  rmdir(dir.c_str());
}

TEST(TracePointsTest, RecordsNoClockOrBuildCouldHaveMadeAreSkipped) {
  const std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  const uint32_t begin = static_cast<uint32_t>(TracePoint::kCallBegin);
  WriteFile(dir + "/odd", Header(5) + Record(1000, begin) + Record(-5, begin) +
                              Record(INT64_MAX, begin) + Record(2000, 0) +
                              Record(3000, kMaxTracePoint + 1));
  absl::StatusOr<TraceFile> file = ReadTraceFile(dir + "/odd");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->records.size(), 1u);
  EXPECT_EQ(file->records[0].nanos, 1000);
  std::remove((dir + "/odd").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace homarpc::transport

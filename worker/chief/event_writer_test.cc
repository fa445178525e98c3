#include "worker/chief/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/tfrecord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::chief {
namespace {

using ::lockstep::v1::Event;

std::string TestDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(base != nullptr ? base : "/tmp", "/event_writer_test_", info->name(), "_",
                      ::getpid());
}

// Every record of the file at `path`, both CRCs checked, parsed as Events.
std::vector<Event> ReadEvents(const std::string& path) {
  std::vector<Event> events;
  absl::StatusOr<TfRecordReader> reader = TfRecordReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return events;
  while (true) {
    absl::StatusOr<std::string> record = reader->Next();
    if (absl::IsOutOfRange(record.status())) break;
    EXPECT_TRUE(record.ok()) << record.status();
    if (!record.ok()) break;
    Event event;
    EXPECT_TRUE(event.ParseFromString(*record)) << "record " << events.size();
    events.push_back(event);
  }
  return events;
}

TEST(EventWriterTest, WritesScalarsTensorBoardCanRead) {
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  std::string dir = TestDir();
  auto writer = EventWriter::Create({.dir = dir, .hostname = "host7", .clock = &clock});
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->path(), dir + "/events.out.tfevents.1700000000.host7");
  for (int step = 1; step <= 5; ++step) {
    clock.Advance(absl::Milliseconds(1500));
    ASSERT_TRUE((*writer)->AddScalar(summary_tags::kLoss, step, 1.0f / step).ok());
  }
  ASSERT_TRUE((*writer)->AddScalars(5, {{"accuracy/train", 0.75f}, {"busbw_gbps", 3.5f}}).ok());
  ASSERT_TRUE((*writer)->Flush().ok());

  // Flushed: readable while the writer is still open.
  std::vector<Event> events = ReadEvents((*writer)->path());
  ASSERT_EQ(events.size(), 7u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_DOUBLE_EQ(events[0].wall_time(), 1700000000.0);
  for (int step = 1; step <= 5; ++step) {
    const Event& e = events[step];
    EXPECT_EQ(e.step(), step);
    EXPECT_DOUBLE_EQ(e.wall_time(), 1700000000.0 + 1.5 * step);
    ASSERT_EQ(e.summary().value_size(), 1);
    EXPECT_EQ(e.summary().value(0).tag(), "loss");
    EXPECT_FLOAT_EQ(e.summary().value(0).simple_value(), 1.0f / step);
  }
  ASSERT_EQ(events[6].summary().value_size(), 2);
  EXPECT_EQ(events[6].summary().value(1).tag(), "busbw_gbps");
  EXPECT_FLOAT_EQ(events[6].summary().value(1).simple_value(), 3.5f);
}

// TensorBoard reads the file while the job trains: every event added so far is there,
// whole, without a Flush() (stdio alone would keep them in its buffer).
TEST(EventWriterTest, EventsAreReadableAsSoonAsTheyAreAdded) {
  auto writer = EventWriter::Create({.dir = TestDir(), .hostname = "h"});
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE((*writer)->AddScalars(step, {{"loss", 1.0f / step}, {"x", 2.0f}}).ok());
    std::vector<Event> events = ReadEvents((*writer)->path());
    ASSERT_EQ(events.size(), 1u + step);
    EXPECT_EQ(events.back().step(), step);
    EXPECT_EQ(events.back().summary().value_size(), 2);
  }
}

TEST(EventWriterTest, WireFormatUsesTensorFlowFieldNumbers) {
  Event e;
  e.set_wall_time(1.0);                            // field 1, fixed64: tag 0x09
  e.set_step(3);                                   // field 2, varint: tag 0x10
  e.mutable_summary()->add_value()->set_tag("t");  // field 5, bytes: tag 0x2a
  e.mutable_summary()->mutable_value(0)->set_simple_value(2.0f);
  std::string wire = e.SerializeAsString();
  EXPECT_EQ(static_cast<uint8_t>(wire[0]), 0x09);
  EXPECT_EQ(static_cast<uint8_t>(wire[9]), 0x10);
  EXPECT_EQ(static_cast<uint8_t>(wire[11]), 0x2a);
  EXPECT_EQ(static_cast<uint8_t>(wire[12]), 10);  // the Summary's length
  // Summary{value(1): Value{tag(1): "t", simple_value(2, fixed32): 2.0f}}.
  EXPECT_EQ(wire.substr(13), std::string("\x0a\x08\x0a\x01t\x15\x00\x00\x00\x40", 10));
  Event version;
  version.set_file_version("v");  // field 3, bytes: tag 0x1a
  EXPECT_EQ(version.SerializeAsString(), std::string("\x1a\x01v"));
}

TEST(EventWriterTest, ConcurrentWritersProduceWholeRecords) {
  std::string dir = TestDir();
  std::string path;
  {
    auto writer = EventWriter::Create({.dir = dir, .hostname = "h"});
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 100; ++i) {
          EXPECT_TRUE((*writer)->AddScalar(absl::StrCat("thread", t), i, float(i)).ok());
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }  // the destructor flushes
  std::vector<Event> events = ReadEvents(path);
  ASSERT_EQ(events.size(), 401u);
  std::vector<int> per_thread(4, 0);
  for (size_t i = 1; i < events.size(); ++i) {
    const std::string& tag = events[i].summary().value(0).tag();
    ASSERT_TRUE(absl::StartsWith(tag, "thread")) << tag;
    int t = tag.back() - '0';
    EXPECT_EQ(events[i].step(), per_thread[t]++);  // each thread's events stay in order
  }
  EXPECT_EQ(per_thread, std::vector<int>(4, 100));
}

TEST(EventWriterTest, CorruptedByteIsDetectedByTheReader) {
  std::string dir = TestDir();
  std::string path;
  {
    auto writer = EventWriter::Create({.dir = dir, .hostname = "h"});
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    ASSERT_TRUE((*writer)->AddScalar("loss", 1, 0.5f).ok());
    ASSERT_TRUE((*writer)->AddScalar("loss", 2, 0.25f).ok());
  }
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  char c = (*bytes)[bytes->size() - 10] ^ 0x04;  // inside the last record's data
  ASSERT_EQ(::pwrite(fd, &c, 1, bytes->size() - 10), 1);
  ::close(fd);

  absl::StatusOr<TfRecordReader> reader = TfRecordReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(reader->Next().ok());  // file_version
  EXPECT_TRUE(reader->Next().ok());  // step 1
  absl::Status status = reader->Next().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("data CRC mismatch"));
}

TEST(EventWriterTest, SameNameInOneSecondIsRefusedUnlessSuffixed) {
  FakeClock clock;
  std::string dir = TestDir();
  auto first = EventWriter::Create({.dir = dir, .hostname = "h", .clock = &clock});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(EventWriter::Create({.dir = dir, .hostname = "h", .clock = &clock}).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto second = EventWriter::Create(
      {.dir = dir, .hostname = "h", .filename_suffix = ".eval", .clock = &clock});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(absl::EndsWith((*second)->path(), ".h.eval"));
}

TEST(EventWriterTest, UnwritableDirectoryNamesTheField) {
  std::string dir = TestDir();
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::string file = dir + "/plain";
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  absl::Status status = EventWriter::Create({.dir = file + "/tb"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("summaries.dir"));
}

}  // namespace
}  // namespace lockstep::chief

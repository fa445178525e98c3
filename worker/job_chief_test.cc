#include "worker/job_chief.h"

#include <dirent.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lockstep/v1/event.pb.h"
#include "worker/chief/tfrecord.h"

namespace lockstep::worker {
namespace {

// 29 steps of 48 examples per epoch (1438 examples: the last 46 of each epoch dropped).
constexpr TrainEpoch kDigits = {.steps_per_epoch = 29, .examples_per_step = 48};

TEST(DataPositionAfter, CountsEpochsInStepsThePipelineRuns) {
  // After 30 epochs the position is epoch 30, element 0; the examples-based count
  // (870 * 48 / 1438 = 29.03) would say epoch 29, element 46.
  v1::DataPosition end = DataPositionAfter(870, kDigits, 870);
  EXPECT_EQ(end.epoch(), 30);
  EXPECT_EQ(end.element(), 0);
  v1::DataPosition mid = DataPositionAfter(100, kDigits, 100);
  EXPECT_EQ(mid.epoch(), 3);
  EXPECT_EQ(mid.element(), (100 - 87) * 48);
  EXPECT_EQ(DecodeIteratorState(mid.iterator_state()).value(), 100);
}

TEST(DataPositionAfter, StreamedInputStillRecordsTheIteratorPosition) {
  v1::DataPosition p = DataPositionAfter(250, TrainEpoch{}, 250);
  EXPECT_EQ(p.epoch(), 0);
  EXPECT_EQ(p.element(), 0);
  EXPECT_EQ(p.iterator_state(), "steps_returned=250");
  EXPECT_EQ(DecodeIteratorState(p.iterator_state()).value(), 250);
}

TEST(DecodeIteratorState, RefusesWhatItDidNotWrite) {
  for (const char* bad : {"", "steps_returned=", "steps_returned=-3", "steps=4", "opaque"}) {
    absl::StatusOr<int64_t> s = DecodeIteratorState(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << bad;
    EXPECT_NE(s.status().message().find("data_position.iterator_state"), std::string::npos);
  }
}

// The chief's event file holds every summary written so far while the job still runs
// (the writer is open), so TensorBoard shows a job as it trains.
TEST(JobChief, SummariesAreInTheEventFileWhileTheJobRuns) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  v1::Partition partition;
  partition.set_job_id("job-000007");
  partition.set_is_chief(true);
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/job_chief_tb");
  partition.mutable_spec()->mutable_summaries()->set_dir(dir);
  auto chief = JobChief::Create(partition, Clock::Real());
  ASSERT_TRUE(chief.ok()) << chief.status();
  std::string path;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    if (absl::StartsWith(e->d_name, "events.out.tfevents.")) path = dir + "/" + e->d_name;
  }
  closedir(d);
  ASSERT_FALSE(path.empty()) << "no event file in " << dir;
  for (int64_t step = 10; step <= 30; step += 10) {
    ASSERT_TRUE((*chief)->AddScalars(step, {{"loss", 0.5f}, {"accuracy/train", 0.9f}}).ok());
    auto reader = chief::TfRecordReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    int64_t records = 0, last_step = -1;
    while (true) {
      absl::StatusOr<std::string> record = reader->Next();
      if (absl::IsOutOfRange(record.status())) break;
      ASSERT_TRUE(record.ok()) << record.status();
      v1::Event event;
      ASSERT_TRUE(event.ParseFromString(*record));
      ++records;
      last_step = event.step();
    }
    EXPECT_EQ(records, 1 + step / 10) << "the file version and every summary so far";
    EXPECT_EQ(last_step, step);
  }
}

}  // namespace
}  // namespace lockstep::worker

#include "worker/job_chief.h"

#include <sys/stat.h>
#include <utime.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/partition_group.h"

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

// A worker's copies under --state_dir do not pile up: a job starting (here a non-chief
// rank keeping a copy) deletes the folders of other jobs beyond the retention, the oldest
// written first, and keeps its own.
TEST(JobChiefCopies, AJobStartingDeletesEndedJobsCopiesBeyondTheRetention) {
  const std::string state = absl::StrCat(std::getenv("TEST_TMPDIR"), "/copies");
  ASSERT_EQ(::mkdir(state.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((state + "/checkpoints").c_str(), 0755), 0);
  long when = 1000;
  for (const char* job : {"job-000001@1", "job-000002@2", "job-000003@3"}) {
    const std::string dir = state + "/checkpoints/" + job;
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
    ASSERT_TRUE(static_cast<bool>(std::ofstream(dir + "/ckpt-0000000005.lsckpt") << "x"));
    struct utimbuf times = {when, when};
    when += 1000;
    ASSERT_EQ(::utime(dir.c_str(), &times), 0);
  }
  v1::Partition p;
  p.set_job_id("job-000004");
  p.set_job_uid("job-000004@4");
  p.set_attempt(1);
  SetWorkerGroup({"127.0.0.1:2000", "127.0.0.1:2001"}, 1, &p);
  p.mutable_spec()->mutable_checkpoint()->set_dir("ckpt");  // the chief's; this rank copies
  p.mutable_spec()->mutable_checkpoint()->set_keep(2);
  p.mutable_plan()->mutable_checkpoint()->set_keep(2);  // what the lowering makes of it
  absl::StatusOr<std::unique_ptr<JobChief>> chief =
      JobChief::Create(p, Clock::Real(), state, /*retained_copy_jobs=*/1);
  ASSERT_TRUE(chief.ok()) << chief.status();
  auto exists = [&](const std::string& job) {
    struct stat st;
    return ::stat((state + "/checkpoints/" + job).c_str(), &st) == 0;
  };
  EXPECT_FALSE(exists("job-000001@1"));
  EXPECT_FALSE(exists("job-000002@2"));
  EXPECT_TRUE(exists("job-000003@3"));  // the newest other job's
  EXPECT_TRUE(exists("job-000004@4"));  // this job's, created for its copies
}

}  // namespace
}  // namespace lockstep::worker

#include "worker/job_chief.h"

#include <string>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace lockstep::worker

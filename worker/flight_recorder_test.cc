#include "worker/flight_recorder.h"

#include "common/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

collectives::CollectiveCall Call(int64_t seq, size_t bytes = 1024) {
  return {seq, "all-reduce", bytes};
}

TEST(FlightRecorderTest, KeepsTheLastCollectivesWithEntryAndExit) {
  FakeClock clock;
  FlightRecorder recorder("job-1", 2, 1, &clock, {.capacity = 3, .window_steps = 50});
  for (int64_t seq = 1; seq <= 5; ++seq) {
    recorder.OnEnter(Call(seq, seq * 100));
    clock.Advance(absl::Milliseconds(10));
    if (seq < 5)
      recorder.OnLeave(Call(seq), seq == 4 ? absl::UnavailableError("x") : absl::OkStatus());
  }
  const v1::FlightRecord r = recorder.Snapshot();
  EXPECT_EQ(r.job_id(), "job-1");
  EXPECT_EQ(r.attempt(), 2);
  EXPECT_EQ(r.worker_rank(), 1);
  EXPECT_EQ(r.last_seq_entered(), 5);
  EXPECT_EQ(r.last_seq_left(), 4);
  ASSERT_EQ(r.collectives_size(), 3);
  EXPECT_EQ(r.collectives(0).seq(), 3);
  EXPECT_EQ(r.collectives(0).bytes(), 300);
  EXPECT_EQ(r.collectives(0).kind(), "all-reduce");
  EXPECT_EQ(r.collectives(0).left_unix_micros() - r.collectives(0).entered_unix_micros(), 10000);
  EXPECT_FALSE(r.collectives(0).failed());
  EXPECT_TRUE(r.collectives(1).failed());
  EXPECT_EQ(r.collectives(2).seq(), 5);
  EXPECT_EQ(r.collectives(2).left_unix_micros(), 0);  // still in it
  EXPECT_EQ(r.recorded_unix_micros(), absl::ToUnixMicros(clock.Now()));
}

TEST(FlightRecorderTest, APhaseKeepsItsStartUntilItChanges) {
  FakeClock clock;
  FlightRecorder recorder("job-1", 1, 0, &clock);
  EXPECT_EQ(recorder.Snapshot().phase(), v1::PHASE_STARTING);
  recorder.SetPhase(v1::PHASE_INPUT, 7);
  const int64_t entered = absl::ToUnixMicros(clock.Now());
  clock.Advance(absl::Seconds(3));
  recorder.SetPhase(v1::PHASE_INPUT, 7);  // the same: still since then
  v1::FlightRecord r = recorder.Snapshot();
  EXPECT_EQ(r.phase(), v1::PHASE_INPUT);
  EXPECT_EQ(r.step(), 7);
  EXPECT_EQ(r.phase_entered_unix_micros(), entered);
  recorder.SetPhase(v1::PHASE_COMPUTE, 7);
  r = recorder.Snapshot();
  EXPECT_EQ(r.phase(), v1::PHASE_COMPUTE);
  EXPECT_EQ(r.phase_entered_unix_micros(), absl::ToUnixMicros(clock.Now()));
}

TEST(FlightRecorderTest, StepTimesAreAveragedOverTheWindow) {
  FakeClock clock;
  FlightRecorder recorder("job-1", 1, 0, &clock, {.capacity = 4, .window_steps = 2});
  EXPECT_EQ(recorder.Snapshot().window_steps(), 0);
  recorder.EndStep(absl::Milliseconds(100), absl::Milliseconds(200));  // leaves the window
  recorder.EndStep(absl::Milliseconds(10), absl::Milliseconds(20));
  recorder.EndStep(absl::Milliseconds(30), absl::Milliseconds(40));
  const v1::FlightRecord r = recorder.Snapshot();
  EXPECT_EQ(r.window_steps(), 2);
  EXPECT_DOUBLE_EQ(r.mean_compute_ms(), 20);
  EXPECT_DOUBLE_EQ(r.mean_step_ms(), 30);
}

TEST(FlightRecorderTest, CapacityZeroKeepsNoCollectivesButCountsThem) {
  FakeClock clock;
  FlightRecorder recorder("job-1", 1, 0, &clock, {.capacity = 0, .window_steps = 1});
  recorder.OnEnter(Call(1));
  recorder.OnLeave(Call(1), absl::OkStatus());
  const v1::FlightRecord r = recorder.Snapshot();
  EXPECT_EQ(r.collectives_size(), 0);
  EXPECT_EQ(r.last_seq_left(), 1);
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

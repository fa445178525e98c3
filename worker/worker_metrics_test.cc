#include "worker/worker_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(WorkerMetricsTest, StepsAndTheirPhases) {
  MetricsRegistry registry;
  WorkerMetrics m(&registry);
  distribute::TrainStepResult r;
  r.examples = 32;
  r.times.compute = absl::Milliseconds(30);
  r.times.allreduce_wait = absl::Milliseconds(5);
  r.times.apply = absl::Milliseconds(2);
  r.times.total = absl::Milliseconds(40);
  m.StepDone(r, absl::Milliseconds(1));
  m.StepDone(r, absl::Milliseconds(1));
  m.WindowClosed(1234.5);
  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_worker_steps_total 2"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_examples_total 64"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_examples_per_second 1234.5"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_step_seconds_count 2"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_step_seconds_sum 0.08"));
  for (const char* phase : {"compute", "allreduce_wait", "apply", "input_wait"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("lockstep_worker_step_phase_seconds_count{phase=\"",
                                             phase, "\"} 2")));
  }
  EXPECT_THAT(text, HasSubstr("lockstep_worker_step_phase_seconds_sum{phase=\"compute\"} 0.06"));
}

TEST(WorkerMetricsTest, AllReduceBandwidthBySize) {
  MetricsRegistry registry;
  WorkerMetrics m(&registry);
  // 1 MiB in 1 ms over 4 ranks: algbw 1 GiB/s * 1000/1024, busbw 1.5 times that.
  m.AllReduceDone(1 << 20, absl::Milliseconds(1), 4);
  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_worker_allreduce_bytes_total{size=\"le_1MiB\"} 1048576"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_allreduce_algbw_bytes_per_second{size=\"le_1MiB\"} "
                              "1048576000"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_allreduce_busbw_bytes_per_second{size=\"le_1MiB\"} "
                              "1572864000"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_allreduce_bytes_total{size=\"le_4KiB\"} 0"));
  // A zero-time all-reduce counts its bytes but sets no bandwidth.
  m.AllReduceDone(10, absl::ZeroDuration(), 2);
  EXPECT_THAT(registry.TextFormat(),
              HasSubstr("lockstep_worker_allreduce_bytes_total{size=\"le_4KiB\"} 10"));
}

TEST(WorkerMetricsTest, SizeBucketBounds) {
  EXPECT_EQ(WorkerMetrics::SizeBucket(0), 0);
  EXPECT_EQ(WorkerMetrics::SizeBucket(4096), 0);
  EXPECT_EQ(WorkerMetrics::SizeBucket(4097), 1);
  EXPECT_EQ(WorkerMetrics::SizeBucket(1 << 20), 2);
  EXPECT_EQ(WorkerMetrics::SizeBucket(16 << 20), 3);
  EXPECT_EQ(WorkerMetrics::SizeBucket((16 << 20) + 1), 4);
}

TEST(WorkerMetricsTest, BytesByPeerAndCheckpoints) {
  MetricsRegistry registry;
  WorkerMetrics m(&registry);
  m.Sent(1, 100);
  m.Sent(1, 50);
  m.Received(2, 7);
  m.CheckpointWritten(absl::Milliseconds(20), 4096);
  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_worker_peer_sent_bytes_total{peer=\"1\"} 150"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_peer_received_bytes_total{peer=\"2\"} 7"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_checkpoint_bytes_total 4096"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_checkpoint_write_seconds_count 1"));
}

TEST(WorkerMetricsTest, DeviceMemoryByGpu) {
  MetricsRegistry registry;
  WorkerMetrics m(&registry);
  EXPECT_THAT(registry.TextFormat(), Not(HasSubstr("lockstep_worker_gpu_peak_bytes")));
  m.DeviceMemory("/gpu:0", 1000, 4096);
  m.DeviceMemory("/gpu:1", 7, 512);
  m.DeviceMemory("/gpu:0", 1536, 8192);  // the next window: the gauge follows
  const std::string text = registry.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_worker_gpu_peak_bytes{device=\"/gpu:0\"} 1536"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_gpu_reserved_bytes{device=\"/gpu:0\"} 8192"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_gpu_peak_bytes{device=\"/gpu:1\"} 7"));
  EXPECT_THAT(text, HasSubstr("lockstep_worker_gpu_reserved_bytes{device=\"/gpu:1\"} 512"));
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

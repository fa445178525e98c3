#include "worker/metrics_window.h"

#include <map>

#include "gtest/gtest.h"
#include "worker/chief/event_writer.h"

namespace lockstep {
namespace worker {
namespace {

distribute::TrainStepResult Step(double loss, int compute_ms, int wait_ms) {
  distribute::TrainStepResult r;
  r.loss = loss;
  r.times.compute = absl::Milliseconds(compute_ms);
  r.times.allreduce_wait = absl::Milliseconds(wait_ms);
  r.times.apply = absl::Milliseconds(1);
  r.times.total = absl::Milliseconds(compute_ms + wait_ms + 1);
  return r;
}

// Two steps of a 64-example global batch in 0.5 s, with 4 MB all-reduced by a group of 4 in
// 0.1 s of that: the report and the chief's scalars carry the same figures.
TEST(MetricsWindowTest, OneWindowFeedsTheReportAndTheScalarsAlike) {
  const absl::Time start = absl::FromUnixSeconds(100);
  collectives::CollectiveCommunicator::AllReduceTotals before;
  before.bytes = 1000;
  before.time = absl::Seconds(1);
  MetricsWindow window(64, start, before);
  window.Add(Step(2.0, 10, 4));
  window.Add(Step(1.0, 20, 6));
  EXPECT_EQ(window.steps(), 2);
  distribute::CrossDeviceOps::AllReduceStats after;
  after.group_size = 4;
  after.totals.bytes = 1000 + 4000000;
  after.totals.time = absl::Seconds(1) + absl::Milliseconds(100);
  const WindowSummary s = window.Close(42, start + absl::Milliseconds(500), after, 0.01, 0.75);
  EXPECT_EQ(s.step, 42);
  EXPECT_DOUBLE_EQ(s.loss, 1.5);
  EXPECT_DOUBLE_EQ(s.examples_per_sec, 2 * 64 / 0.5);
  EXPECT_NEAR(s.busbw_gbps, 2.0 * 3 / 4 * 4e6 / 0.1 / 1e9, 1e-12);
  EXPECT_DOUBLE_EQ(s.compute_ms, 15);
  EXPECT_DOUBLE_EQ(s.allreduce_wait_ms, 5);
  EXPECT_DOUBLE_EQ(s.apply_ms, 1);
  EXPECT_DOUBLE_EQ(s.step_ms, 21);
  v1::JobReport report;
  s.ApplyTo(&report);
  std::map<std::string, float> scalars;
  for (const auto& [tag, value] : s.Scalars()) scalars[tag] = value;
  namespace tags = chief::summary_tags;
  EXPECT_EQ(report.step(), 42);
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kLoss)], report.loss());
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kExamplesPerSec)], report.examples_per_sec());
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kBusBandwidth)], report.busbw_gbps());
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kComputeMs)], report.compute_ms());
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kTrainAccuracy)], report.train_accuracy());
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kLearningRate)], report.learning_rate());
  // The next window starts empty, from the close.
  EXPECT_EQ(window.steps(), 0);
  window.Add(Step(0.5, 10, 0));
  const WindowSummary next = window.Close(43, start + absl::Milliseconds(600), after, 0.01, -1);
  EXPECT_DOUBLE_EQ(next.loss, 0.5);
  EXPECT_DOUBLE_EQ(next.busbw_gbps, 0);  // nothing reduced in it
  EXPECT_NEAR(next.examples_per_sec, 64 / 0.1, 1e-6);
}

// A CPU job's window carries no device memory and no GPU scalar; a GPU job's carries each
// GPU's figures into the report and the largest peak, in MiB, into the scalars.
TEST(MetricsWindowTest, DeviceMemoryGoesToTheReportAndTheLargestPeakToTheScalars) {
  namespace tags = chief::summary_tags;
  WindowSummary cpu;
  v1::JobReport cpu_report;
  cpu.ApplyTo(&cpu_report);
  EXPECT_EQ(cpu_report.device_memory_size(), 0);
  for (const auto& [tag, value] : cpu.Scalars()) EXPECT_NE(tag, tags::kGpuPeakMib);

  WindowSummary gpu;
  for (const auto& [device, peak] : {std::pair<const char*, uint64_t>{"/gpu:0", 3 << 20},
                                     std::pair<const char*, uint64_t>{"/gpu:1", 5 << 20}}) {
    v1::DeviceMemory& m = gpu.device_memory.emplace_back();
    m.set_device(device);
    m.set_peak_bytes(peak);
    m.set_reserved_bytes(peak + 4096);
    m.set_device_allocations(12);
  }
  v1::JobReport report;
  gpu.ApplyTo(&report);
  ASSERT_EQ(report.device_memory_size(), 2);
  EXPECT_EQ(report.device_memory(1).device(), "/gpu:1");
  EXPECT_EQ(report.device_memory(1).peak_bytes(), uint64_t{5} << 20);
  EXPECT_EQ(report.device_memory(1).reserved_bytes(), (uint64_t{5} << 20) + 4096);
  EXPECT_EQ(report.device_memory(0).device_allocations(), 12);
  std::map<std::string, float> scalars;
  for (const auto& [tag, value] : gpu.Scalars()) scalars[tag] = value;
  ASSERT_EQ(scalars.count(std::string(tags::kGpuPeakMib)), 1u);
  EXPECT_FLOAT_EQ(scalars[std::string(tags::kGpuPeakMib)], 5.0f);
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

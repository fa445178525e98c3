#include "worker/metrics_window.h"

#include <algorithm>

#include "worker/chief/event_writer.h"

namespace lockstep {
namespace worker {

namespace tags = chief::summary_tags;

void WindowSummary::ApplyTo(v1::JobReport* report) const {
  report->set_step(step);
  report->set_loss(loss);
  report->set_examples_per_sec(examples_per_sec);
  report->set_busbw_gbps(busbw_gbps);
  report->set_learning_rate(learning_rate);
  report->set_train_accuracy(train_accuracy);
  report->set_step_ms(step_ms);
  report->set_compute_ms(compute_ms);
  report->set_allreduce_wait_ms(allreduce_wait_ms);
  report->set_apply_ms(apply_ms);
  report->mutable_device_memory()->Assign(device_memory.begin(), device_memory.end());
}

std::vector<std::pair<std::string, float>> WindowSummary::Scalars() const {
  std::vector<std::pair<std::string, float>> scalars = {
      {std::string(tags::kLoss), loss},
      {std::string(tags::kTrainAccuracy), static_cast<float>(train_accuracy)},
      {std::string(tags::kLearningRate), learning_rate},
      {std::string(tags::kExamplesPerSec), examples_per_sec},
      {std::string(tags::kBusBandwidth), busbw_gbps},
      {std::string(tags::kStepMs), step_ms},
      {std::string(tags::kComputeMs), compute_ms},
      {std::string(tags::kAllReduceWaitMs), allreduce_wait_ms},
      {std::string(tags::kApplyMs), apply_ms}};
  if (!device_memory.empty()) {
    uint64_t peak = 0;
    for (const v1::DeviceMemory& m : device_memory) peak = std::max(peak, m.peak_bytes());
    scalars.emplace_back(std::string(tags::kGpuPeakMib), static_cast<float>(peak / 1048576.0));
  }
  return scalars;
}

MetricsWindow::MetricsWindow(int64_t global_batch, absl::Time start,
                             collectives::CollectiveCommunicator::AllReduceTotals reduced)
    : global_batch_(global_batch), start_(start), reduced_(reduced) {}

void MetricsWindow::Add(const distribute::TrainStepResult& result) {
  ++steps_;
  loss_sum_ += result.loss;
  times_ += result.times;
}

WindowSummary MetricsWindow::Close(int64_t step, absl::Time now,
                                   const distribute::CrossDeviceOps::AllReduceStats& reduced,
                                   double learning_rate, double train_accuracy) {
  WindowSummary s;
  s.step = step;
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  const double secs = std::max(absl::ToDoubleSeconds(now - start_), 1e-9);
  s.loss = loss_sum_ / steps;
  s.examples_per_sec = static_cast<double>(steps_ * global_batch_) / secs;
  const int64_t bytes = reduced.totals.bytes - reduced_.bytes;
  const double reducing_secs = absl::ToDoubleSeconds(reduced.totals.time - reduced_.time);
  const int g = reduced.group_size;
  s.busbw_gbps = g > 1 && reducing_secs > 0 ? 2.0 * (g - 1) / g * bytes / reducing_secs / 1e9 : 0;
  s.learning_rate = learning_rate;
  s.train_accuracy = train_accuracy;
  auto per_step_ms = [&](absl::Duration d) { return absl::ToDoubleMilliseconds(d) / steps; };
  s.step_ms = per_step_ms(times_.total);
  s.compute_ms = per_step_ms(times_.compute);
  s.allreduce_wait_ms = per_step_ms(times_.allreduce_wait);
  s.apply_ms = per_step_ms(times_.apply);
  start_ = now;
  reduced_ = reduced.totals;
  steps_ = 0;
  loss_sum_ = 0;
  times_ = {};
  return s;
}

}  // namespace worker
}  // namespace lockstep

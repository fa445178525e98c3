// MetricsWindow: a worker's training figures over the steps since the last summary (the
// summary window, summaries.every_steps): mean loss, examples per second, where the steps
// went (distribute::StepTimes), and the gradient all-reduces' bus bandwidth over the time
// they ran. One window feeds both the JobReport the worker heartbeats and the chief's
// TensorBoard scalars (WindowSummary), so the two always say the same.
//
// Thread model: one thread (the executor's training loop).
#ifndef LOCKSTEP_WORKER_METRICS_WINDOW_H_
#define LOCKSTEP_WORKER_METRICS_WINDOW_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "distribute/cross_device_ops.h"
#include "distribute/trainer.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/job.pb.h"

namespace lockstep {
namespace worker {

// The figures of one closed window.
struct WindowSummary {
  int64_t step = 0;  // the window's last step
  double loss = 0;   // mean over its steps
  double examples_per_sec = 0;
  double busbw_gbps = 0;  // ring convention 2(n-1)/n over the group that reduces
  double learning_rate = 0;
  double train_accuracy = -1;  // -1: the model computes none
  // Milliseconds per step: the whole step, and its phases.
  double step_ms = 0;
  double compute_ms = 0;
  double allreduce_wait_ms = 0;
  double apply_ms = 0;
  // A GPU job's device memory as the window closed (JobDeviceMemory; set by its caller);
  // empty for a CPU job.
  std::vector<v1::DeviceMemory> device_memory;

  // Sets the report's figures (step, loss, examples/s, ..., device memory).
  void ApplyTo(v1::JobReport* report) const;
  // The chief's scalars (chief::summary_tags); a GPU job's adds the largest peak in MiB.
  std::vector<std::pair<std::string, float>> Scalars() const;
};

class MetricsWindow {
 public:
  // A window starting at `start`, with the gradient all-reduces' totals `reduced` so far.
  MetricsWindow(int64_t global_batch, absl::Time start,
                collectives::CollectiveCommunicator::AllReduceTotals reduced);

  void Add(const distribute::TrainStepResult& result);
  int64_t steps() const { return steps_; }

  // Ends the window after `step` at `now`, given the gradient all-reduces' totals then, and
  // starts the next one. Its bus bandwidth is over the time the all-reduces ran in the
  // window (not the steps': they overlap the backward pass).
  WindowSummary Close(int64_t step, absl::Time now,
                      const distribute::CrossDeviceOps::AllReduceStats& reduced,
                      double learning_rate, double train_accuracy);

 private:
  const int64_t global_batch_;
  absl::Time start_;
  collectives::CollectiveCommunicator::AllReduceTotals reduced_;
  int64_t steps_ = 0;
  double loss_sum_ = 0;
  distribute::StepTimes times_;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_METRICS_WINDOW_H_

// OpProfiler: where one GPU's stream spends its time, per graph node and phase, measured with
// timing events (CudaApi::TimingEventCreate / EventElapsedMs) for a profiling run
// (bench/train_throughput --profile_ops; tools/gpu_check.sh's train_profile step).
//
// The stream's timeline is cut into segments by marks: Mark(row, op, phase) records an event
// and attributes the stream's time from it to the next mark to that row and phase. The
// executor marks each node's forward and backward kernels, the gradient hand-offs (the
// all-reduces enqueued there) and the loss readback; the optimizer marks its update, and the
// segment after it ("outside the step") is the stream's time until the next step enqueues
// work: what the device waits for the host between steps. Every moment between the first and
// the last mark belongs to exactly one row, so the rows add up to the stream's time. A
// segment is device time, kernels plus any idle gap while the host had not enqueued the next
// work yet (a launch-bound op shows as such). On FakeCudaApi a segment's "milliseconds" are
// the count of work it enqueued (launches, copies, memsets): the kernel count per op.
//
// Where it is switched on: GpuDevice::profiler (engine/gpu/gpu_device.h); the executor
// (ExecutorOptions::gpu) and the optimizer on that device use it when it is set, and do nothing
// more (no event, no branch beyond a null test) when it is not.
//
// Cost when on: an EventRecord per mark (a host call; the device records a timestamp; what it costs
// is for a GPU run to measure, bench/gpu_runs.md); the events' times are read by Harvest, which
// never waits: the executor calls it after the step's one synchronisation, when the marks before it
// have completed.
//
// Ownership: owns its events; borrows the CudaApi and the stream, which must outlive it.
// Thread model: thread-safe (one mutex); marks come from the thread driving the stream.
#ifndef LOCKSTEP_ENGINE_GPU_OP_PROFILER_H_
#define LOCKSTEP_ENGINE_GPU_OP_PROFILER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/cuda/cuda_api.h"

namespace lockstep::engine::gpu {

class OpProfiler {
 public:
  enum class Phase { kForward, kBackward, kOther };

  // One row of the profile: totals over the steps since Create or Reset.
  struct Row {
    std::string name;          // a node's name, or what the segment is ("optimizer apply")
    std::string op;            // the node's op ("MATMUL"), or "-"
    double ms[3] = {0, 0, 0};  // per Phase
    int64_t calls[3] = {0, 0, 0};
    double total_ms() const { return ms[0] + ms[1] + ms[2]; }
  };
  struct Profile {
    int64_t steps = 0;      // Executor::ComputeGradients calls (BeginStep)
    std::vector<Row> rows;  // in the order first marked
    double total_ms() const;
  };

  static absl::StatusOr<std::unique_ptr<OpProfiler>> Create(CudaApi* api, CudaStream stream);
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // From now on the stream's work belongs to row `name` (op `op`) in `phase`, until the next
  // mark. `call`: counts as one more call of that row and phase (false: the row resumes after
  // a nested segment, e.g. a gradient hand-off inside a node's backward pass).
  absl::Status Mark(absl::string_view name, absl::string_view op, Phase phase, bool call = true);
  // Ends a nested segment: marks again the row and phase that the last Mark ended, without a
  // call (e.g. back to a node's backward pass after a gradient hand-off inside it).
  absl::Status Resume();
  // Counts a step (the executor, at each ComputeGradients).
  void BeginStep();
  // Reads the times of the segments whose work has completed. Never waits.
  absl::Status Harvest();
  // Waits for the stream, then forgets the totals and steps so far (after a warmup).
  absl::Status Reset();
  // Waits for the stream, harvests, and returns the totals; the open segment (after the last
  // mark) is left out.
  absl::StatusOr<Profile> Finish();

  // The profile as a Markdown table: per row, its op, forward, backward and other milliseconds
  // per step, calls per step and share of the stream's time; then the total per step.
  // `unit`: what the numbers are ("ms", or "launches" for the fake's counts).
  static std::string Table(const Profile& profile, absl::string_view unit = "ms");

 private:
  struct Marked {
    CudaEvent event = nullptr;
    int row = 0;
    Phase phase = Phase::kOther;
  };
  OpProfiler(CudaApi* api, CudaStream stream) : api_(api), stream_(stream) {}
  absl::Status HarvestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int RowLocked(absl::string_view name, absl::string_view op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MarkLocked(int row, Phase phase, bool call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CudaApi* const api_;
  const CudaStream stream_;
  absl::Mutex mu_;
  std::deque<Marked> marks_ ABSL_GUARDED_BY(mu_);     // recorded, not yet read; oldest first
  std::vector<CudaEvent> free_ ABSL_GUARDED_BY(mu_);  // read, reusable
  std::vector<CudaEvent> all_ ABSL_GUARDED_BY(mu_);   // every event made (destroyed at the end)
  std::vector<Row> rows_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> row_index_ ABSL_GUARDED_BY(mu_);  // name -> rows_
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  // The row and phase of the last mark and of the one before it (Resume), -1: none.
  int current_row_ ABSL_GUARDED_BY(mu_) = -1;
  Phase current_phase_ ABSL_GUARDED_BY(mu_) = Phase::kOther;
  int previous_row_ ABSL_GUARDED_BY(mu_) = -1;
  Phase previous_phase_ ABSL_GUARDED_BY(mu_) = Phase::kOther;
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_OP_PROFILER_H_

// FlightRecorder: one rank's memory of what it was doing, for the hang verdict and
// `lockstep dump` (DESIGN.md, "When a job hangs"). It keeps the last `capacity` collectives
// of the job's cross-worker group (a CollectiveObserver set on that communicator: sequence
// number, kind, bytes, when the rank entered and left each), the rank's current training
// phase and step (set by the executor and the trainer), and the compute and step times of
// the last `window_steps` steps (for stragglers). Snapshot() is the FlightRecord that rides
// in every heartbeat.
//
// Ownership: borrows the clock (it must outlive the recorder). Thread model: thread-safe;
// the collective callbacks come from the communicator's threads, phases from the training
// and replica threads, Snapshot() from the agent's heartbeat thread. Each call takes one
// short lock and reads the clock once.
#ifndef LOCKSTEP_WORKER_FLIGHT_RECORDER_H_
#define LOCKSTEP_WORKER_FLIGHT_RECORDER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/collective_observer.h"
#include "common/clock.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace worker {

struct FlightRecorderOptions {
  size_t capacity = 64;   // collectives kept
  int window_steps = 50;  // steps whose times are averaged
};

class FlightRecorder final : public collectives::CollectiveObserver {
 public:
  FlightRecorder(std::string job_id, int attempt, int worker_rank, Clock* clock,
                 FlightRecorderOptions options = {});

  void OnEnter(const collectives::CollectiveCall& call) override;
  void OnLeave(const collectives::CollectiveCall& call, const absl::Status& status) override;

  // The rank entered `phase` of `step` now (the same phase again keeps its start); a
  // negative `step` keeps the current one.
  void SetPhase(v1::TrainPhase phase, int64_t step);
  // A step ended: its compute phase and whole time, for the window's means.
  void EndStep(absl::Duration compute, absl::Duration total);

  // The record as it is now (recorded_unix_micros: now).
  v1::FlightRecord Snapshot() const;

 private:
  struct Entry {
    int64_t seq;
    const char* kind;
    size_t bytes;
    absl::Time entered;
    absl::Time left;  // InfinitePast: still in it
    bool failed;
  };

  const std::string job_id_;
  const int attempt_;
  const int worker_rank_;
  Clock* const clock_;
  const FlightRecorderOptions options_;

  mutable absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);  // oldest first
  int64_t last_entered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_left_ ABSL_GUARDED_BY(mu_) = 0;
  v1::TrainPhase phase_ ABSL_GUARDED_BY(mu_) = v1::PHASE_STARTING;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time phase_entered_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Duration, absl::Duration>> steps_ ABSL_GUARDED_BY(mu_);
  absl::Duration compute_sum_ ABSL_GUARDED_BY(mu_);
  absl::Duration total_sum_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_FLIGHT_RECORDER_H_

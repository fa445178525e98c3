// TestHooks: faults that a test asks one lockstepd to inject into every job it runs, to
// check the hang verdict and the straggler detection (tests/diagnostics_test.cc). They come
// only from the LOCKSTEP_TEST_HOOKS environment variable, read by worker/main.cc (never
// from a job spec, so no user can stall a cluster through one); comma-separated:
//   stall=input@STEP     before step STEP's batch is read, wait until the job is aborted
//   stall=compute@STEP   in step STEP's compute phase, the same
//   slow_compute_ms=N    every step's compute phase takes N ms more
// Thread model: a value type.
#ifndef LOCKSTEP_WORKER_TEST_HOOKS_H_
#define LOCKSTEP_WORKER_TEST_HOOKS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace worker {

struct TestHooks {
  v1::TrainPhase stall_phase = v1::TRAIN_PHASE_UNSPECIFIED;  // INPUT or COMPUTE; unset: none
  int64_t stall_step = 0;
  absl::Duration slow_compute;

  bool empty() const {
    return stall_phase == v1::TRAIN_PHASE_UNSPECIFIED && slow_compute == absl::ZeroDuration();
  }
  // Stalls in `phase` of `step`.
  bool StallsAt(v1::TrainPhase phase, int64_t step) const {
    return stall_phase == phase && stall_step == step;
  }
};

// INVALID_ARGUMENT naming LOCKSTEP_TEST_HOOKS and the part it cannot read. "" is no hooks.
absl::StatusOr<TestHooks> ParseTestHooks(absl::string_view spec);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_TEST_HOOKS_H_

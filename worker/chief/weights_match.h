// WeightsMatch: whether two checkpoints of one model hold the same weights up to float
// rounding, the criterion of the equivalence tests (a job's weights do not depend on its
// number of workers). Test-only.
//
// Why this criterion: two runs that sum the same gradients in a different order (per-worker
// partial sums, then the all-reduce) cannot be bitwise equal, and Adam divides by the root
// of a second moment that is tiny for some elements, so a few elements can differ by far
// more than 1e-5 of themselves while the tensor as a whole agrees. "Within 1e-5 relative"
// is therefore read per tensor, in norm, as numerical analysis reads a vector's relative
// error: ||a - b||_2 <= rel_tol * ||a||_2, and, so that an error concentrated in a few
// elements is not averaged away over a large tensor, also in the max norm:
// max|a - b| <= rel_tol * max|a|.
//
// Stateless functions; thread-safe.
#ifndef LOCKSTEP_WORKER_CHIEF_WEIGHTS_MATCH_H_
#define LOCKSTEP_WORKER_CHIEF_WEIGHTS_MATCH_H_

#include <string>

#include "absl/status/status.h"
#include "lockstep/v1/checkpoint.pb.h"

namespace lockstep::chief {

// The default tolerance: the "same weights within 1e-5 relative".
inline constexpr double kWeightsRelativeTolerance = 1e-5;

// OK when `a` and `b` hold the same variables (names, in order; f32; shapes) and every one
// agrees within `rel_tol` in both norms (see above). Otherwise FAILED_PRECONDITION naming
// each variable that differs, with its relative errors and its worst element. `summary`,
// when not null, receives one line per variable with both relative errors, matching or not.
absl::Status WeightsMatch(const v1::Checkpoint& a, const v1::Checkpoint& b,
                          double rel_tol = kWeightsRelativeTolerance,
                          std::string* summary = nullptr);

}  // namespace lockstep::chief

#endif  // LOCKSTEP_WORKER_CHIEF_WEIGHTS_MATCH_H_

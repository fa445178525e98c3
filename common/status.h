// Status helpers shared by every module.
//
// Abseil 20220623 predates ABSL_RETURN_IF_ERROR, so the project keeps its own:
//   LS_RETURN_IF_ERROR(expr)         returns expr's status if it is not OK.
//   LS_ASSIGN_OR_RETURN(lhs, expr)   evaluates a StatusOr, returns its status if not OK,
//                                    otherwise moves its value into lhs (which may declare).
// Both evaluate `expr` exactly once.
#ifndef LOCKSTEP_COMMON_STATUS_H_
#define LOCKSTEP_COMMON_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LS_STATUS_CONCAT_INNER_(a, b) a##b
#define LS_STATUS_CONCAT_(a, b) LS_STATUS_CONCAT_INNER_(a, b)

#define LS_RETURN_IF_ERROR(expr)                                 \
  do {                                                           \
    ::absl::Status ls_status_ = (expr);                          \
    if (ABSL_PREDICT_FALSE(!ls_status_.ok())) return ls_status_; \
  } while (0)

#define LS_ASSIGN_OR_RETURN(lhs, expr) \
  LS_ASSIGN_OR_RETURN_IMPL_(LS_STATUS_CONCAT_(ls_statusor_, __LINE__), lhs, expr)

#define LS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)              \
  auto statusor = (expr);                                           \
  if (ABSL_PREDICT_FALSE(!statusor.ok())) return statusor.status(); \
  lhs = std::move(statusor).value()

namespace lockstep {

// Returns `status` with `context` prepended to its message ("context: message"), keeping
// its code and payloads. OK stays OK. Use it to say to whom something happened (rank, task,
// job).
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_STATUS_H_

// Rendering of the coordinator's GetClusterStatus answer for `lockstep status` and
// `lockstep local`: a fixed-width table, or the proto's canonical JSON mapping.
// Thread model: pure functions.
#ifndef LOCKSTEP_CLIENT_STATUS_FORMAT_H_
#define LOCKSTEP_CLIENT_STATUS_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace client {

// One row per task: TASK, ADDRESS, STATE, INCARNATION (8 hex digits), HEARTBEAT (seconds
// since the last one), DEVICES, JOB (the job it runs and its step, or "-"); then a summary line ("3
// tasks: 3 ALIVE").
std::string FormatStatusTable(const v1::GetClusterStatusResponse& status);

// The proto3 JSON mapping (lowerCamelCase names, enums by name, 64-bit ints as strings).
absl::StatusOr<std::string> FormatStatusJson(const v1::GetClusterStatusResponse& status);

// Number of tasks in `state`.
int CountInState(const v1::GetClusterStatusResponse& status, v1::TaskState state);

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_STATUS_FORMAT_H_

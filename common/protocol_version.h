// The version of the wire protocol Lockstep's daemons speak to each other: one integer,
// bumped whenever a message a daemon sends or relies on changes meaning (a field a worker
// must set or read, a plan section it must execute), not with every release. A worker sends
// it when it registers (RegisterWorkerRequest.protocol_version) and the coordinator takes
// only workers of its own version, so a mixed cluster fails at registration with both
// versions named, never later on a field one side does not know.
//
// History: 1: workers send their version; JobPlan version 2 (JobPlan.restart).
#ifndef LOCKSTEP_COMMON_PROTOCOL_VERSION_H_
#define LOCKSTEP_COMMON_PROTOCOL_VERSION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {

constexpr int32_t kProtocolVersion = 1;

// OK when `theirs` is kProtocolVersion; FAILED_PRECONDITION naming `who`, both versions and
// what to do otherwise (0: a daemon from before versions were sent).
absl::Status CheckProtocolVersion(int32_t theirs, absl::string_view who);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_PROTOCOL_VERSION_H_

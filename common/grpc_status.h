// The one place where gRPC statuses and absl::Status meet. Both use the same canonical
// codes (google.rpc.Code), so the conversion keeps the code and the message.
// Thread model: pure functions.
#ifndef LOCKSTEP_COMMON_GRPC_STATUS_H_
#define LOCKSTEP_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// FromGrpcStatus, with what was called and on whom prepended to the message, e.g.
// "Heartbeat to coordinator 10.0.0.1:7000: ...". Codes that say the peer could not be
// reached (UNAVAILABLE, and DEADLINE_EXCEEDED before any answer) also get a hint on what
// to check.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_GRPC_STATUS_H_

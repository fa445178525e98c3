// CheckHealth: one grpc.health.v1.Health/Check call in plaintext (what a Kubernetes gRPC
// probe does), for tests and operators' tools. The messages are encoded by hand (one field
// each), so no generated health stubs are needed.
// Errors: the call's own, converted (UNAVAILABLE when nothing answers, DEADLINE_EXCEEDED,
// NOT_FOUND for a service name the server does not know); INTERNAL for an answer that is not
// a HealthCheckResponse. Thread model: none (a free function).
#ifndef LOCKSTEP_COMMON_HEALTH_CHECK_H_
#define LOCKSTEP_COMMON_HEALTH_CHECK_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

// grpc.health.v1.HealthCheckResponse.ServingStatus, same numbers.
enum class HealthStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

absl::StatusOr<HealthStatus> CheckHealth(const std::string& address,
                                         const std::string& service = "",
                                         absl::Duration timeout = absl::Seconds(5));

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_HEALTH_CHECK_H_

// ServeMonitoring: what a daemon's --metrics_address and --health_address start, the same for
// lockstep-coordinator and lockstepd: `registry` served on `metrics_address` (when set) and a
// HealthServer on `health_address` (when set; NOT_SERVING until the daemon says otherwise).
// Logs each bound port as "serving /metrics on HOST:PORT" and "serving
// grpc.health.v1.Health on HOST:PORT" (port 0 picks one; tests read these lines).
// Errors: MetricsRegistry::Serve's and HealthServer::Create's (INVALID_ARGUMENT naming the
// flag, UNAVAILABLE for a port in use). Thread model: none (a free function).
#ifndef LOCKSTEP_COMMON_MONITORING_H_
#define LOCKSTEP_COMMON_MONITORING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/health_server.h"
#include "common/metrics.h"

namespace lockstep {

// The health server, or null when `health_address` is empty.
absl::StatusOr<std::unique_ptr<HealthServer>> ServeMonitoring(const std::string& metrics_address,
                                                              const std::string& health_address,
                                                              MetricsRegistry* registry);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_MONITORING_H_

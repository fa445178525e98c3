#include "common/monitoring.h"

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace {

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

}  // namespace

absl::StatusOr<std::unique_ptr<HealthServer>> ServeMonitoring(const std::string& metrics_address,
                                                              const std::string& health_address,
                                                              MetricsRegistry* registry) {
  if (!metrics_address.empty()) {
    LS_RETURN_IF_ERROR(registry->Serve(metrics_address));
    spdlog::info("serving /metrics on {}:{}", HostOf(metrics_address), registry->port());
  }
  if (health_address.empty()) return nullptr;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<HealthServer> health, HealthServer::Create(health_address));
  spdlog::info("serving grpc.health.v1.Health on {}:{}", HostOf(health_address), health->port());
  return health;
}

}  // namespace lockstep

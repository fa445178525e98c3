#include "common/grpc_channel.h"

#include "common/net.h"
#include "common/status.h"

namespace lockstep {

absl::StatusOr<std::shared_ptr<grpc::Channel>> CoordinatorChannel(const std::string& address) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return Annotate(hp.status(), "coordinator address");
  grpc::ChannelArguments args;
  // Reconnect quickly after the coordinator restarts (gRPC's default backoff reaches 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Callers decide about retries; gRPC's own retry filter would only add per-call buffering.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace lockstep

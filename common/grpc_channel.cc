#include "common/grpc_channel.h"

#include "common/net.h"
#include "common/status.h"
#include "common/tls_credentials.h"

namespace lockstep {

absl::StatusOr<std::shared_ptr<grpc::Channel>> CoordinatorChannel(const std::string& address,
                                                                  const TlsOptions& tls) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return Annotate(hp.status(), "coordinator address");
  grpc::ChannelArguments args;
  // Reconnect quickly after the coordinator restarts (gRPC's default backoff reaches 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC also takes this as the least time one connection attempt (TCP, the TLS handshake,
  // HTTP/2 SETTINGS) may take before it is abandoned. At 100 ms, a TLS handshake on a busy
  // 2-core machine was cut off again and again, and workers could not register for 20 s.
  // A refused connection (the coordinator down) still fails at once; calls keep their own
  // deadlines.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // Callers decide about retries; gRPC's own retry filter would only add per-call buffering.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  if (!tls.insecure && !tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(address, ChannelCredentials(tls), args);
}

}  // namespace lockstep

// The gRPC channel every Lockstep client (lockstepd's agent, the `lockstep` CLI) uses to reach
// the coordinator: the address is checked first, reconnects are quick after a coordinator
// restart, and gRPC's own retries are off (callers decide: the agent backs off, the CLI
// reports). It speaks TLS unless `tls.insecure`: the coordinator's certificate is verified
// against the cluster CA and its name against the host dialed (or `tls.server_name`); a
// daemon presents its own certificate (mutual TLS), a client its bearer token. Certificate
// files are watched, so rotated ones are used without a restart.
#ifndef LOCKSTEP_COMMON_GRPC_CHANNEL_H_
#define LOCKSTEP_COMMON_GRPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/tls_options.h"

namespace lockstep {

// INVALID_ARGUMENT "coordinator address: ..." when `address` is not host:port.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CoordinatorChannel(const std::string& address,
                                                                  const TlsOptions& tls);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_GRPC_CHANNEL_H_

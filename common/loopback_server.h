// StartLoopbackServer: a plaintext gRPC server on 127.0.0.1, any free port, serving one
// service, for tests of a client against a small in-process fake of a service.
// Thread model: a function; the server it returns is gRPC's (thread-safe).
#ifndef LOCKSTEP_COMMON_LOOPBACK_SERVER_H_
#define LOCKSTEP_COMMON_LOOPBACK_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace lockstep {

struct LoopbackServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // "127.0.0.1:<port>"
};

// UNAVAILABLE when no port could be bound. `service` must outlive the server.
absl::StatusOr<LoopbackServer> StartLoopbackServer(grpc::Service* service);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_LOOPBACK_SERVER_H_

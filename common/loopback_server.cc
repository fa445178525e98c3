#include "common/loopback_server.h"

namespace lockstep {

absl::StatusOr<LoopbackServer> StartLoopbackServer(grpc::Service* service) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  LoopbackServer s;
  s.server = builder.BuildAndStart();
  if (s.server == nullptr || port == 0) {
    return absl::UnavailableError("cannot start a gRPC server on 127.0.0.1, any port");
  }
  s.address = "127.0.0.1:" + std::to_string(port);
  return s;
}

}  // namespace lockstep

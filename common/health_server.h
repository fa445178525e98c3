// HealthServer: the standard gRPC health service (grpc.health.v1.Health: Check and Watch) in
// plaintext on its own port (`--health_address`), and nothing else on that port: Kubernetes'
// gRPC probes speak no TLS, and a plaintext port must not reach the daemon's services.
// Every service name ("" included) answers the one status set with SetServing:
//
//   NOT_SERVING (starting) --SetServing(true)--> SERVING --SetServing(false)--> NOT_SERVING
//                                                  ^------- SetServing(true) ------'
//   any --Drain()--> NOT_SERVING, DRAINING: SetServing is ignored from then on
//   any --Shutdown()--> NOT_SERVING for good (Watch streams are told, then the port closes)
//
// The health service is gRPC's own (its default health check service), which gRPC attaches
// to every server built once EnableHealthService() has run; a daemon calls that before it
// builds any server, so its main port serves the same service (the daemon sets its status
// there too).
//
// Ownership: owns the server. Thread model: thread-safe; Shutdown() (also run by the
// destructor) waits for the server to stop.
#ifndef LOCKSTEP_COMMON_HEALTH_SERVER_H_
#define LOCKSTEP_COMMON_HEALTH_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class CallbackGenericService;
class Server;
}  // namespace grpc

namespace lockstep {

// Makes every gRPC server this process builds from now on serve grpc.health.v1.Health
// (gRPC's process-wide switch; idempotent).
void EnableHealthService();

// Sets the health status of every service name on `server` (one built after
// EnableHealthService(); otherwise nothing happens).
void SetServing(grpc::Server* server, bool serving);

class HealthServer {
 public:
  // Listens on `address` ("HOST:PORT"; port 0: any free port, read back with port()), NOT_SERVING.
  // INVALID_ARGUMENT for an address that is not HOST:PORT, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Create(const std::string& address);
  ~HealthServer();

  int port() const { return port_; }
  void SetServing(bool serving);
  // NOT_SERVING from now on: the daemon is draining (SIGTERM, shutdown).
  void Drain();
  void Shutdown();

 private:
  HealthServer() = default;

  std::unique_ptr<grpc::CallbackGenericService> unimplemented_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_HEALTH_SERVER_H_

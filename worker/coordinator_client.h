// CoordinatorClient: what a worker (and the CLI) asks of the coordinator, as an interface,
// so that the agent and the rendezvous store are tested with fakes and know nothing of
// gRPC. The gRPC adapter is GrpcCoordinatorClient (grpc_coordinator_client.h).
//
// Every method returns the coordinator's error (see proto/lockstep/v1/coordinator.proto),
// or UNAVAILABLE / DEADLINE_EXCEEDED when the coordinator cannot be reached in time; the
// message names the call and the coordinator's address.
// Thread model: implementations are thread-safe; calls may run concurrently.
#ifndef LOCKSTEP_WORKER_COORDINATOR_CLIENT_H_
#define LOCKSTEP_WORKER_COORDINATOR_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace worker {

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;

  virtual absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) = 0;
  virtual absl::Status Deregister(const v1::DeregisterRequest& request) = 0;
  virtual absl::Status SetKey(const std::string& key, const std::string& value, bool overwrite) = 0;
  // Waits on the coordinator up to `timeout` for the key.
  virtual absl::StatusOr<std::string> GetKey(const std::string& key, absl::Duration timeout) = 0;
  virtual absl::Status Barrier(const v1::BarrierRequest& request) = 0;
  virtual absl::StatusOr<v1::GetClusterStatusResponse> GetClusterStatus() = 0;

  // "host:port" of the coordinator, for messages.
  virtual std::string address() const = 0;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_COORDINATOR_CLIENT_H_

// WorkerServiceClient: what a worker asks of the coordinator (its worker-facing
// lockstep.v1.WorkerService), as an interface, so that the agent and the rendezvous store
// are tested with fakes and know nothing of gRPC. The gRPC adapter is
// GrpcWorkerServiceClient (grpc_worker_service_client.h). Clients of the job service (the CLI)
// use client/job_service_client.h instead.
//
// Every method returns the coordinator's error (see proto/lockstep/v1/coordinator.proto),
// or UNAVAILABLE / DEADLINE_EXCEEDED when the coordinator cannot be reached in time; the
// message names the call and the coordinator's address.
// Thread model: implementations are thread-safe; calls may run concurrently.
#ifndef LOCKSTEP_WORKER_WORKER_SERVICE_CLIENT_H_
#define LOCKSTEP_WORKER_WORKER_SERVICE_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace worker {

// The reading end of a WatchAssignments server stream.
// Thread model: Next() from one thread; Cancel() from any thread, any number of times.
class AssignmentStream {
 public:
  virtual ~AssignmentStream() = default;
  // Blocks for the next assignment; nullopt when the stream ended cleanly (or was
  // cancelled); the coordinator's error otherwise (UNAVAILABLE when it went away, NOT_FOUND
  // or ABORTED when it does not know this worker's task or incarnation).
  virtual absl::StatusOr<std::optional<v1::Assignment>> Next() = 0;
  // Ends a blocked or later Next() promptly.
  virtual void Cancel() = 0;
};

class WorkerServiceClient {
 public:
  virtual ~WorkerServiceClient() = default;

  virtual absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) = 0;
  virtual absl::Status Deregister(const v1::DeregisterRequest& request) = 0;
  virtual absl::Status SetKey(const std::string& key, const std::string& value, bool overwrite) = 0;
  // Waits on the coordinator up to `timeout` for the key.
  virtual absl::StatusOr<std::string> GetKey(const std::string& key, absl::Duration timeout) = 0;
  virtual absl::Status Barrier(const v1::BarrierRequest& request) = 0;
  // Opens the stream of partitions and aborts the coordinator pushes to this worker. The
  // stream has no deadline (it lives while the worker is ALIVE); Cancel() ends it.
  // Default: UNIMPLEMENTED, for clients that do not run jobs.
  virtual absl::StatusOr<std::unique_ptr<AssignmentStream>> WatchAssignments(
      const v1::WatchAssignmentsRequest& request) {
    (void)request;
    return absl::UnimplementedError("WatchAssignments is not offered by this client");
  }

  // "host:port" of the coordinator, for messages.
  virtual std::string address() const = 0;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_WORKER_SERVICE_CLIENT_H_

// GrpcWorkerService: the gRPC adapter of lockstep.v1.WorkerService, the coordinator's
// worker-facing service (membership, heartbeats, assignments, the key-value store and
// barriers). Each handler authorizes its caller (GrpcAuthorizer, authz.cc's WorkerService
// table: worker identities only), validates the request, calls Membership / KvStore /
// Barriers / JobService (a heartbeat's diagnostics go to the DiagnosticsService), and converts the
// absl::Status (common/grpc_status.h). RPCs that name a task are refused to any identity but the
// one that registered it; rendezvous keys and barriers of a job attempt to any but its workers
// (JobService::CheckKeyAccess).
//
// It is served on gRPC's synchronous API: the server thread that polls the completion queue
// runs the handler itself, so a short call (Heartbeat) costs no hand-off between threads
// (the callback API adds its own polling threads and a hand-off, which on a VM costs tens of
// microseconds per call). Handlers that wait (GetKey and Barrier with a timeout, the
// WatchAssignments stream in grpc_stream_writer.h) hold their server thread while they wait;
// gRPC starts more threads as they are needed, up to the server's ResourceQuota
// (--max_server_threads). So every wait is bounded: GetKey/Barrier per job and per caller and
// in length (wait_limits.h), streams per task and per identity (watch_limits.h).
// CoordinatorServer::Shutdown wakes every wait (KvStore, Barriers and JobService::Shutdown) before
// the server's own Shutdown.
//
// Ownership: borrows the domain objects, the Clock and the authorizer; they must outlive it.
// Thread model: gRPC calls the handlers concurrently; the domain objects are thread-safe.
#ifndef LOCKSTEP_COORDINATOR_GRPC_WORKER_SERVICE_H_
#define LOCKSTEP_COORDINATOR_GRPC_WORKER_SERVICE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/barriers.h"
#include "coordinator/checkpoint_fetch.h"
#include "coordinator/diagnostics_service.h"
#include "coordinator/grpc_authorizer.h"
#include "coordinator/job_service.h"
#include "coordinator/kv_store.h"
#include "coordinator/membership.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace coordinator {

class GrpcWorkerService final : public v1::WorkerService::Service {
 public:
  GrpcWorkerService(Membership* membership, KvStore* kv, Barriers* barriers, JobService* jobs,
                    DiagnosticsService* diagnostics, Clock* clock, uint64_t incarnation,
                    const GrpcAuthorizer* authorizer, CheckpointFetch* fetch = nullptr);

  grpc::Status RegisterWorker(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Deregister(grpc::ServerContext* ctx, const v1::DeregisterRequest* request,
                          v1::DeregisterResponse* response) override;
  grpc::Status SetKey(grpc::ServerContext* ctx, const v1::SetKeyRequest* request,
                      v1::SetKeyResponse* response) override;
  grpc::Status GetKey(grpc::ServerContext* ctx, const v1::GetKeyRequest* request,
                      v1::GetKeyResponse* response) override;
  grpc::Status Barrier(grpc::ServerContext* ctx, const v1::BarrierRequest* request,
                       v1::BarrierResponse* response) override;
  // A worker's answer to a fetch's UploadCheckpoint (checkpoint_fetch.h);
  // UNIMPLEMENTED without a CheckpointFetch.
  grpc::Status UploadCheckpoint(grpc::ServerContext* ctx,
                                grpc::ServerReader<v1::CheckpointUploadChunk>* reader,
                                v1::UploadCheckpointResponse* response) override;
  grpc::Status WatchAssignments(grpc::ServerContext* ctx,
                                const v1::WatchAssignmentsRequest* request,
                                grpc::ServerWriter<v1::Assignment>* writer) override;

 private:
  absl::Time DeadlineFor(int64_t timeout_ms) const;
  // The authorizer's answer for `method` of the WorkerService; `*identity` as there.
  grpc::Status Authorize(grpc::ServerContext* ctx, const char* method,
                         std::string* identity = nullptr) const;
  // Authorize(), then Membership::CheckHolder for `task` (RPCs naming a task); `*identity`
  // as Authorize's.
  grpc::Status AuthorizeTask(grpc::ServerContext* ctx, const char* method, const v1::TaskId& task,
                             std::string* identity = nullptr) const;
  // Authorize(), then JobService::CheckKeyAccess for `key` (a key or a barrier id); sets
  // `*caller` to who the waits of the call count against (KvStore, Barriers): the caller's
  // identity, or under --insecure (no identities) its connection's peer address.
  grpc::Status AuthorizeKey(grpc::ServerContext* ctx, const char* method, const std::string& key,
                            std::string* caller = nullptr) const;

  Membership* const membership_;
  KvStore* const kv_;
  Barriers* const barriers_;
  JobService* const jobs_;
  DiagnosticsService* const diagnostics_;  // heartbeats' flight records and log lines
  CheckpointFetch* const fetch_;           // uploads of checkpoints clients fetch
  Clock* const clock_;
  const uint64_t incarnation_;
  const GrpcAuthorizer* const authorizer_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_WORKER_SERVICE_H_

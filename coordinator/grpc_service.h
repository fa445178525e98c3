// CoordinatorService: the gRPC adapter over the coordinator's domain objects. Each handler
// validates the request, calls Membership / KvStore / Barriers / JobService, and converts the
// absl::Status (common/grpc_status.h).
//
// It is served on gRPC's synchronous API: the server thread that polls the completion queue
// runs the handler itself, so a short call (GetClusterStatus, Heartbeat) costs no hand-off
// between threads (the callback API adds its own polling threads and a hand-off, which on
// a VM costs tens of microseconds per call). Handlers that wait (GetKey and Barrier with a
// timeout, the WatchAssignments and WatchJob streams in grpc_stream_writer.h) hold their
// server thread while they wait; gRPC starts more threads as they are needed. Shutdown()
// wakes every wait, so the server's own Shutdown finishes promptly.
//
// Every handler first authorizes its caller (Authorize below, coordinator/authz.h's table):
// a verified certificate from the cluster CA names a daemon (a worker) or a client, else
// the `authorization: Bearer` token names a client from the TokenTable. Worker RPCs that
// name a task are refused to any identity but the one that registered it. With `insecure`
// every call is allowed.
//
// Ownership: borrows the domain objects and the Clock; they must outlive it.
// Thread model: gRPC calls the handlers concurrently; the domain objects are thread-safe.
#ifndef LOCKSTEP_COORDINATOR_GRPC_SERVICE_H_
#define LOCKSTEP_COORDINATOR_GRPC_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/authz.h"
#include "coordinator/barriers.h"
#include "coordinator/diagnostics_service.h"
#include "coordinator/job_service.h"
#include "coordinator/kv_store.h"
#include "coordinator/membership.h"
#include "coordinator/token_table.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace coordinator {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  CoordinatorService(Membership* membership, KvStore* kv, Barriers* barriers, JobService* jobs,
                     Clock* clock, uint64_t incarnation, bool insecure, TokenTable tokens);
  ~CoordinatorService() override;

  // Replaces the clients' tokens (the coordinator reloads --tokens_file on SIGHUP): calls
  // authorized after it returns use `tokens`.
  void SetTokens(TokenTable tokens);

  // Wakes pending GetKey/Barrier waits and open streams (they answer UNAVAILABLE). Call
  // before the server's Shutdown.
  void Shutdown();

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
  grpc::Status GetClusterStatus(grpc::ServerContext* ctx,
                                const v1::GetClusterStatusRequest* request,
                                v1::GetClusterStatusResponse* response) override;
  grpc::Status SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  grpc::Status DrainWorker(grpc::ServerContext* ctx, const v1::DrainWorkerRequest* request,
                           v1::DrainWorkerResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status WatchAssignments(grpc::ServerContext* ctx,
                                const v1::WatchAssignmentsRequest* request,
                                grpc::ServerWriter<v1::Assignment>* writer) override;
  // Diagnostics (viewers): grpc_diagnostics.h over diagnostics_.
  grpc::Status DumpJob(grpc::ServerContext* ctx, const v1::DumpJobRequest* request,
                       v1::DumpJobResponse* response) override;
  grpc::Status GetJobLogs(grpc::ServerContext* ctx, const v1::GetJobLogsRequest* request,
                          grpc::ServerWriter<v1::JobLogLines>* writer) override;

 private:
  absl::Time DeadlineFor(int64_t timeout_ms) const;
  // Who is calling: the verified certificate's principal, else the bearer token's; nullopt
  // when neither is known.
  std::optional<Principal> Caller(grpc::ServerContext* ctx) const;
  // OK when the caller may call `method` (always under --insecure); sets `*identity` to the
  // caller's name ("" under --insecure); UNAUTHENTICATED / PERMISSION_DENIED otherwise.
  // Handlers pass __func__: their names are the proto's method names, which authz.h's
  // table is keyed by.
  grpc::Status Authorize(grpc::ServerContext* ctx, const char* method,
                         std::string* identity = nullptr) const;
  // Authorize(), then Membership::CheckHolder for `task` (worker RPCs naming a task).
  grpc::Status AuthorizeTask(grpc::ServerContext* ctx, const char* method,
                             const v1::TaskId& task) const;

  Membership* const membership_;
  KvStore* const kv_;
  Barriers* const barriers_;
  JobService* const jobs_;
  Clock* const clock_;
  const uint64_t incarnation_;
  const absl::Time start_;
  const bool insecure_;
  mutable absl::Mutex tokens_mu_;
  TokenTable tokens_ ABSL_GUARDED_BY(tokens_mu_);
  // Flight records and log lines from heartbeats; the hang verdict.
  DiagnosticsService diagnostics_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_SERVICE_H_

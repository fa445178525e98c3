// JobServiceClient: the one client of the coordinator's client-facing service
// (lockstep.v1.JobService: cluster status, jobs, draining, diagnostics), for every `lockstep`
// command, LocalCluster, the tests and the benchmarks. gRPC stays inside. Every unary call takes
// one path, Call(): a deadline `rpc_timeout` from now, the channel's credentials (built once in
// Create from TlsOptions; the CLI resolves them in client/cli/connection.h), and errors as
// absl::Status naming the RPC and the coordinator's address ("GetJob to coordinator
// 10.0.0.1:7000: ..."), converted in common/grpc_status. lockstepd does not use it: workers
// speak the WorkerService through worker/grpc_worker_service_client.h.
//
// Adding an RPC (say a viewer's GetJobLogs):
//   1. proto/lockstep/v1/coordinator.proto: the rpc in `service JobService` and its
//      messages (the wire name is /lockstep.v1.JobService/GetJobLogs).
//   2. coordinator/authz.cc: its row in kJobServiceRules (kViewers or kOperators); the
//      authz test fails until every rpc of the service has one.
//   3. coordinator/grpc_job_service.{h,cc}: the handler, opening with
//      `Authorize(ctx, __func__)`.
//   4. here: a method named as the RPC whose body builds the request and returns
//      `Call(&v1::JobService::Stub::AsyncGetJobLogs, "GetJobLogs", request)` (a server
//      stream follows WatchJob instead).
//   5. client/cli/: the command, which gets its client from cli::Connect (connection.h).
//
// Ownership: owns its channel and stub. Thread model: thread-safe (gRPC stubs are);
// WatchJob blocks its caller until the job ends.
#ifndef LOCKSTEP_CLIENT_JOB_SERVICE_CLIENT_H_
#define LOCKSTEP_CLIENT_JOB_SERVICE_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/grpc_unary_call.h"
#include "common/tls_options.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace client {

class JobServiceClient {
 public:
  // INVALID_ARGUMENT when `address` is not host:port. Connects lazily, with `tls`
  // (common/grpc_channel.h: the cluster CA and a bearer token or a client certificate, or
  // --insecure). `rpc_timeout` bounds every unary call.
  static absl::StatusOr<std::unique_ptr<JobServiceClient>> Create(
      const std::string& address, const TlsOptions& tls,
      absl::Duration rpc_timeout = absl::Seconds(10));

  absl::StatusOr<v1::GetClusterStatusResponse> GetClusterStatus();
  // The new job's id; INVALID_ARGUMENT naming the field when the coordinator refuses it.
  absl::StatusOr<std::string> SubmitJob(const v1::JobSpec& spec);
  absl::StatusOr<v1::GetJobResponse> GetJob(const std::string& id);
  absl::StatusOr<std::vector<v1::JobRecord>> ListJobs(int limit = 0);
  absl::StatusOr<v1::JobRecord> CancelJob(const std::string& id, const std::string& reason = "");
  // `task` is "worker/1" (type/index). INVALID_ARGUMENT naming a malformed task.
  absl::StatusOr<v1::DrainWorkerResponse> DrainWorker(const std::string& task, bool undo);
  // Releases `task` ("worker/1") from the worker identity bound to it. INVALID_ARGUMENT
  // naming a malformed task; the coordinator's NOT_FOUND / FAILED_PRECONDITION (ALIVE).
  absl::StatusOr<v1::ReleaseTaskResponse> ReleaseTask(const std::string& task);
  // Streams the job's events into `on_event` until the job ends; returns the last event
  // (its job state is terminal). A broken stream is reopened (the first event of a new
  // stream is the current state: a restarting coordinator is waited for) until `deadline`,
  // until the coordinator has been unreachable for `give_up_after` (UNAVAILABLE), or until
  // `stop` (checked between attempts) returns true (CANCELLED).
  absl::StatusOr<v1::JobEvent> WatchJob(const std::string& id,
                                        const std::function<void(const v1::JobEvent&)>& on_event,
                                        absl::Time deadline = absl::InfiniteFuture(),
                                        const std::function<bool()>& stop = nullptr,
                                        absl::Duration give_up_after = absl::Seconds(30));
  // Every rank's latest flight record and the hang verdict. NOT_FOUND naming the job id.
  absl::StatusOr<v1::DumpJobResponse> DumpJob(const std::string& id);
  // Streams the job's log lines into `on_lines` until the message marked `end`; with
  // request.follow() the new ones until the job ends (no deadline), else within
  // `rpc_timeout`. NOT_FOUND naming the job id.
  absl::Status GetJobLogs(const v1::GetJobLogsRequest& request,
                          const std::function<void(const v1::JobLogLines&)>& on_lines);

  // Streams a checkpoint of the job (request.step() 0: the newest), fetched by the coordinator
  // from a worker that holds it, into `on_chunk`: first the file's description, then its
  // bytes in order, the last one marked `last` once the coordinator checked the whole file.
  // An error from `on_chunk` cancels the call and is returned. The call ends by `deadline`.
  // The coordinator's errors (NOT_FOUND, FAILED_PRECONDITION, UNAVAILABLE, DATA_LOSS, ...).
  absl::Status FetchCheckpoint(
      const v1::FetchCheckpointRequest& request,
      const std::function<absl::Status(const v1::CheckpointChunk&)>& on_chunk, absl::Time deadline);
  const std::string& address() const { return address_; }

 private:
  JobServiceClient(std::string address, absl::Duration rpc_timeout,
                   std::unique_ptr<v1::JobService::Stub> stub)
      : address_(std::move(address)), rpc_timeout_(rpc_timeout), stub_(std::move(stub)) {}

  // "<rpc> to coordinator <address>": what every error of this client starts with.
  std::string Context(const char* rpc) const {
    return absl::StrCat(rpc, " to coordinator ", address_);
  }
  // The one unary call path: `start` is the stub's Async<Method>, `rpc` its name.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> (
                                    v1::JobService::Stub::*start)(grpc::ClientContext*,
                                                                  const Request&,
                                                                  grpc::CompletionQueue*),
                                const char* rpc, const Request& request) {
    return UnaryCall(stub_.get(), start, request, rpc_timeout_, Context(rpc));
  }

  const std::string address_;
  const absl::Duration rpc_timeout_;
  std::unique_ptr<v1::JobService::Stub> stub_;
};

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_SERVICE_CLIENT_H_

// GrpcJobService: the gRPC adapter of lockstep.v1.JobService, the coordinator's
// client-facing service (cluster status, jobs, draining, releasing tasks, diagnostics). Each
// handler authorizes its caller (GrpcAuthorizer, authz.cc's JobService table: viewers read,
// operators also change; no worker identity), calls Membership / JobService / DiagnosticsService
// (describe and status carry its hang verdict; DumpJob and GetJobLogs are
// grpc_diagnostics.h's bodies), and converts the
// absl::Status (common/grpc_status.h).
//
// Served on gRPC's synchronous API, as GrpcWorkerService is (see there): the WatchJob and
// GetJobLogs streams (grpc_stream_writer.h) hold their server thread while they wait, so each
// takes a slot from the clients' pool (--max_job_watches) and from its caller's identity's
// (--max_streams_per_identity), and is authorized again when the tokens change;
// CoordinatorServer::Shutdown wakes them (JobService::Shutdown, DiagnosticsService::Shutdown).
//
// Adding an RPC: declare it in coordinator.proto's `service JobService`, add its row to
// authz.cc's kJobServiceRules, override it here (first line `Authorize(ctx, __func__)`), and
// add its method to client/job_service_client.h.
//
// Ownership: borrows the domain objects, the Clock and the authorizer; they must outlive it.
// Thread model: gRPC calls the handlers concurrently; the domain objects are thread-safe.
#ifndef LOCKSTEP_COORDINATOR_GRPC_JOB_SERVICE_H_
#define LOCKSTEP_COORDINATOR_GRPC_JOB_SERVICE_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/checkpoint_fetch.h"
#include "coordinator/diagnostics_service.h"
#include "coordinator/grpc_authorizer.h"
#include "coordinator/job_service.h"
#include "coordinator/membership.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace coordinator {

class GrpcJobService final : public v1::JobService::Service {
 public:
  GrpcJobService(Membership* membership, JobService* jobs, DiagnosticsService* diagnostics,
                 Clock* clock, uint64_t incarnation, const GrpcAuthorizer* authorizer,
                 CheckpointFetch* fetch = nullptr);

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
  grpc::Status ReleaseTask(grpc::ServerContext* ctx, const v1::ReleaseTaskRequest* request,
                           v1::ReleaseTaskResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  // Diagnostics (viewers): grpc_diagnostics.h over the DiagnosticsService.
  grpc::Status DumpJob(grpc::ServerContext* ctx, const v1::DumpJobRequest* request,
                       v1::DumpJobResponse* response) override;
  grpc::Status GetJobLogs(grpc::ServerContext* ctx, const v1::GetJobLogsRequest* request,
                          grpc::ServerWriter<v1::JobLogLines>* writer) override;
  // A job's checkpoint, relayed from a worker (viewers; checkpoint_fetch.h). UNIMPLEMENTED
  // without a CheckpointFetch.
  grpc::Status FetchCheckpoint(grpc::ServerContext* ctx, const v1::FetchCheckpointRequest* request,
                               grpc::ServerWriter<v1::CheckpointChunk>* writer) override;

 private:
  // The authorizer's answer for `method` of the JobService; `*identity` as there.
  grpc::Status Authorize(grpc::ServerContext* ctx, const char* method,
                         std::string* identity = nullptr) const;

  Membership* const membership_;
  JobService* const jobs_;
  DiagnosticsService* const diagnostics_;  // the hang verdict, flight records, log lines
  CheckpointFetch* const fetch_;           // FetchCheckpoint
  const uint64_t incarnation_;
  const absl::Time start_;
  const GrpcAuthorizer* const authorizer_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_JOB_SERVICE_H_

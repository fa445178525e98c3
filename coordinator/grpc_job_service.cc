#include "coordinator/grpc_job_service.h"

#include <string>
#include <utility>
#include <vector>

#include "common/cluster_proto.h"
#include "common/grpc_status.h"
#include "coordinator/grpc_diagnostics.h"
#include "coordinator/grpc_stream_writer.h"
#include "coordinator/job_store/job_store.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

GrpcJobService::GrpcJobService(Membership* membership, JobService* jobs,
                               DiagnosticsService* diagnostics, Clock* clock, uint64_t incarnation,
                               const GrpcAuthorizer* authorizer, CheckpointFetch* fetch)
    : membership_(membership),
      jobs_(jobs),
      diagnostics_(diagnostics),
      fetch_(fetch),
      incarnation_(incarnation),
      start_(clock->Now()),
      authorizer_(authorizer) {}

grpc::Status GrpcJobService::Authorize(grpc::ServerContext* ctx, const char* method,
                                       std::string* identity) const {
  return authorizer_->Authorize(ctx, coordinator::Service::kJob, method, identity);
}

grpc::Status GrpcJobService::GetClusterStatus(grpc::ServerContext* ctx,
                                              const v1::GetClusterStatusRequest*,
                                              v1::GetClusterStatusResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  const auto running = jobs_->RunningTasks();
  for (v1::TaskStatus& s : membership_->Snapshot()) {
    if (auto it = running.find(FromProto(s.task())); it != running.end()) {
      s.set_job_id(it->second.first);
      s.set_step(it->second.second);
    }
    *response->add_tasks() = std::move(s);
  }
  response->set_coordinator_incarnation(incarnation_);
  response->set_coordinator_start_unix_micros(absl::ToUnixMicros(start_));
  ToProto(membership_->Cluster(), response->mutable_cluster());
  response->set_insecure(authorizer_->insecure());
  diagnostics_->Annotate(response);
  return grpc::Status::OK;
}

grpc::Status GrpcJobService::SubmitJob(grpc::ServerContext* ctx,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<std::string> id = jobs_->Submit(request->spec());
  if (!id.ok()) {
    spdlog::warn("SubmitJob \"{}\" from {} refused: {}", request->spec().name(), ctx->peer(),
                 std::string(id.status().message()));
    return ToGrpcStatus(id.status());
  }
  spdlog::info("job {} (\"{}\") submitted", *id, request->spec().name());
  response->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status GrpcJobService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* request,
                                    v1::GetJobResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<v1::GetJobResponse> job = jobs_->Get(request->job_id());
  if (job.ok()) {
    *response = std::move(*job);
    diagnostics_->Annotate(response);
  }
  return ToGrpcStatus(job.status());
}

grpc::Status GrpcJobService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<std::vector<v1::JobRecord>> jobs = jobs_->List(request->limit());
  if (jobs.ok()) {
    for (v1::JobRecord& j : *jobs) *response->add_jobs() = std::move(j);
  }
  return ToGrpcStatus(jobs.status());
}

grpc::Status GrpcJobService::CancelJob(grpc::ServerContext* ctx,
                                       const v1::CancelJobRequest* request,
                                       v1::CancelJobResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<v1::JobRecord> job = jobs_->Cancel(request->job_id(), request->reason());
  if (job.ok()) {
    spdlog::info("job {} cancelled: {}", request->job_id(), job->reason());
    *response->mutable_job() = std::move(*job);
  }
  return ToGrpcStatus(job.status());
}

grpc::Status GrpcJobService::DrainWorker(grpc::ServerContext* ctx,
                                         const v1::DrainWorkerRequest* request,
                                         v1::DrainWorkerResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<v1::DrainWorkerResponse> drained =
      jobs_->Drain(FromProto(request->task()), request->undo());
  if (drained.ok()) {
    spdlog::info("{} {}{}", FromProto(request->task()).ToString(),
                 request->undo() ? "schedulable again" : "drained",
                 drained->job_id().empty() ? "" : " (its job " + drained->job_id() + " stops)");
    *response = std::move(*drained);
  }
  return ToGrpcStatus(drained.status());
}

grpc::Status GrpcJobService::ReleaseTask(grpc::ServerContext* ctx,
                                         const v1::ReleaseTaskRequest* request,
                                         v1::ReleaseTaskResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  const TaskRef task = FromProto(request->task());
  absl::StatusOr<v1::TaskStatus> released = membership_->Release(task);
  if (!released.ok()) return ToGrpcStatus(released.status());
  const std::string identity = membership_->IdentityOf(task);
  spdlog::info("{} released by an operator from identity {}: any identity may register it",
               task.ToString(), identity.empty() ? "(none)" : identity);
  *response->mutable_task() = std::move(*released);
  response->set_identity(identity);
  return grpc::Status::OK;
}

grpc::Status GrpcJobService::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  absl::StatusOr<WatchLimits::Slot> mine = jobs_->watches().OpenIdentityStream(identity);
  if (!mine.ok()) return ToGrpcStatus(mine.status());
  absl::StatusOr<WatchLimits::Slot> slot = jobs_->watches().OpenJobWatch();
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  int64_t seen = 0;
  uint64_t generation = authorizer_->generation();
  const char* method = __func__;
  return ServeStream<v1::JobEvent>(
      ctx, writer,
      [&](absl::Time deadline) { return jobs_->NextEvent(request->job_id(), &seen, deadline); },
      [](const v1::JobEvent& e) { return IsTerminalJobState(e.job().state()); },
      [&] {
        return authorizer_->Reauthorize(ctx, coordinator::Service::kJob, method, &generation);
      });
}

grpc::Status GrpcJobService::DumpJob(grpc::ServerContext* ctx, const v1::DumpJobRequest* request,
                                     v1::DumpJobResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  return ServeDumpJob(*diagnostics_, *request, response);
}

grpc::Status GrpcJobService::GetJobLogs(grpc::ServerContext* ctx,
                                        const v1::GetJobLogsRequest* request,
                                        grpc::ServerWriter<v1::JobLogLines>* writer) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  absl::StatusOr<WatchLimits::Slot> mine = jobs_->watches().OpenIdentityStream(identity);
  if (!mine.ok()) return ToGrpcStatus(mine.status());
  absl::StatusOr<WatchLimits::Slot> slot = jobs_->watches().OpenJobWatch();
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  uint64_t generation = authorizer_->generation();
  const char* method = __func__;
  return ServeJobLogs(*diagnostics_, ctx, *request, writer, [&] {
    return authorizer_->Reauthorize(ctx, coordinator::Service::kJob, method, &generation);
  });
}

grpc::Status GrpcJobService::FetchCheckpoint(grpc::ServerContext* ctx,
                                             const v1::FetchCheckpointRequest* request,
                                             grpc::ServerWriter<v1::CheckpointChunk>* writer) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  if (fetch_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no fetches here");
  absl::StatusOr<WatchLimits::Slot> mine = jobs_->watches().OpenIdentityStream(identity);
  if (!mine.ok()) return ToGrpcStatus(mine.status());
  return ToGrpcStatus(fetch_->Fetch(
      *request, [writer](const v1::CheckpointChunk& c) { return writer->Write(c); },
      [ctx] { return ctx->IsCancelled(); }));
}

}  // namespace coordinator
}  // namespace lockstep

#include "client/job_service_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/job_format.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/status.h"

namespace lockstep {
namespace client {
namespace {

// "worker/1" into `out`. INVALID_ARGUMENT naming a malformed task.
absl::Status ParseTask(const std::string& task, v1::TaskId* out) {
  std::vector<std::string> parts = absl::StrSplit(task, '/');
  int index = -1;
  if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &index) || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task: expected TYPE/INDEX such as worker/1, got \"", task, "\""));
  }
  out->set_type(parts[0]);
  out->set_index(index);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobServiceClient>> JobServiceClient::Create(
    const std::string& address, const TlsOptions& tls, absl::Duration rpc_timeout) {
  LS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, CoordinatorChannel(address, tls));
  return std::unique_ptr<JobServiceClient>(
      new JobServiceClient(address, rpc_timeout, v1::JobService::NewStub(channel)));
}

absl::StatusOr<v1::GetClusterStatusResponse> JobServiceClient::GetClusterStatus() {
  return Call(&v1::JobService::Stub::AsyncGetClusterStatus, "GetClusterStatus",
              v1::GetClusterStatusRequest());
}

absl::StatusOr<std::string> JobServiceClient::SubmitJob(const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  LS_ASSIGN_OR_RETURN(v1::SubmitJobResponse response,
                      Call(&v1::JobService::Stub::AsyncSubmitJob, "SubmitJob", request));
  return response.job_id();
}

absl::StatusOr<v1::GetJobResponse> JobServiceClient::GetJob(const std::string& id) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  return Call(&v1::JobService::Stub::AsyncGetJob, "GetJob", request);
}

absl::StatusOr<std::vector<v1::JobRecord>> JobServiceClient::ListJobs(int limit) {
  v1::ListJobsRequest request;
  request.set_limit(limit);
  LS_ASSIGN_OR_RETURN(v1::ListJobsResponse response,
                      Call(&v1::JobService::Stub::AsyncListJobs, "ListJobs", request));
  return std::vector<v1::JobRecord>(response.jobs().begin(), response.jobs().end());
}

absl::StatusOr<v1::JobRecord> JobServiceClient::CancelJob(const std::string& id,
                                                          const std::string& reason) {
  v1::CancelJobRequest request;
  request.set_job_id(id);
  request.set_reason(reason);
  LS_ASSIGN_OR_RETURN(v1::CancelJobResponse response,
                      Call(&v1::JobService::Stub::AsyncCancelJob, "CancelJob", request));
  return response.job();
}

absl::StatusOr<v1::DrainWorkerResponse> JobServiceClient::DrainWorker(const std::string& task,
                                                                      bool undo) {
  v1::DrainWorkerRequest request;
  LS_RETURN_IF_ERROR(ParseTask(task, request.mutable_task()));
  request.set_undo(undo);
  return Call(&v1::JobService::Stub::AsyncDrainWorker, "DrainWorker", request);
}

absl::StatusOr<v1::ReleaseTaskResponse> JobServiceClient::ReleaseTask(const std::string& task) {
  v1::ReleaseTaskRequest request;
  LS_RETURN_IF_ERROR(ParseTask(task, request.mutable_task()));
  return Call(&v1::JobService::Stub::AsyncReleaseTask, "ReleaseTask", request);
}

absl::StatusOr<v1::JobEvent> JobServiceClient::WatchJob(
    const std::string& id, const std::function<void(const v1::JobEvent&)>& on_event,
    absl::Time deadline, const std::function<bool()>& stop, absl::Duration give_up_after) {
  absl::Status last_error;
  absl::Time failing_since = absl::InfiniteFuture();
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    if (deadline != absl::InfiniteFuture()) ctx.set_deadline(absl::ToChronoTime(deadline));
    v1::WatchJobRequest request;
    request.set_job_id(id);
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->WatchJob(&ctx, request);
    v1::JobEvent event;
    bool ended = false, any = false;
    v1::JobEvent last;
    while (reader->Read(&event)) {
      any = true;
      on_event(event);
      last = event;
      if (JobEnded(event.job().state())) ended = true;
    }
    absl::Status status = FromGrpcStatus(reader->Finish(), Context("WatchJob"));
    if (ended) return last;
    if (status.code() == absl::StatusCode::kNotFound ||
        status.code() == absl::StatusCode::kInvalidArgument) {
      return status;
    }
    last_error = status;
    const absl::Time now = absl::Now();
    if (any) failing_since = absl::InfiniteFuture();
    if (failing_since == absl::InfiniteFuture()) failing_since = now;
    if (now - failing_since >= give_up_after) return status;
    if (stop && stop()) {
      return absl::CancelledError(
          absl::StrCat("stopped watching job ", id, ": ", last_error.message()));
    }
    absl::SleepFor(absl::Milliseconds(200));  // the coordinator may be restarting
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "job ", id, " did not end in time", last_error.ok() ? "" : ": ", last_error.message()));
}

absl::StatusOr<v1::DumpJobResponse> JobServiceClient::DumpJob(const std::string& id) {
  v1::DumpJobRequest request;
  request.set_job_id(id);
  return Call(&v1::JobService::Stub::AsyncDumpJob, "DumpJob", request);
}

absl::Status JobServiceClient::GetJobLogs(
    const v1::GetJobLogsRequest& request,
    const std::function<void(const v1::JobLogLines&)>& on_lines) {
  grpc::ClientContext ctx;
  // Following lasts as long as the job; the coordinator ends the stream then.
  if (!request.follow()) ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
  std::unique_ptr<grpc::ClientReader<v1::JobLogLines>> reader = stub_->GetJobLogs(&ctx, request);
  v1::JobLogLines message;
  while (reader->Read(&message)) {
    on_lines(message);
    if (message.end()) break;
  }
  return FromGrpcStatus(reader->Finish(), Context("GetJobLogs"));
}

absl::Status JobServiceClient::FetchCheckpoint(
    const v1::FetchCheckpointRequest& request,
    const std::function<absl::Status(const v1::CheckpointChunk&)>& on_chunk, absl::Time deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  std::unique_ptr<grpc::ClientReader<v1::CheckpointChunk>> reader =
      stub_->FetchCheckpoint(&ctx, request);
  v1::CheckpointChunk chunk;
  while (reader->Read(&chunk)) {
    if (absl::Status s = on_chunk(chunk); !s.ok()) {
      ctx.TryCancel();
      reader->Finish();
      return s;
    }
    if (chunk.last()) break;
  }
  return FromGrpcStatus(reader->Finish(), Context("FetchCheckpoint"));
}

}  // namespace client
}  // namespace lockstep

#include "client/job_client.h"

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

// One unary call with a deadline; the error names the RPC and the coordinator.
template <typename Request, typename Response>
absl::StatusOr<Response> Call(
    v1::Coordinator::Stub* stub,
    grpc::Status (v1::Coordinator::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const char* name, const Request& request, absl::Duration timeout, const std::string& address) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Response response;
  LS_RETURN_IF_ERROR(FromGrpcStatus((stub->*method)(&ctx, request, &response),
                                    absl::StrCat(name, " to ", address)));
  return response;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobClient>> JobClient::Create(const std::string& address,
                                                             const TlsOptions& tls,
                                                             absl::Duration rpc_timeout) {
  LS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, CoordinatorChannel(address, tls));
  return std::unique_ptr<JobClient>(
      new JobClient(address, rpc_timeout, v1::Coordinator::NewStub(channel)));
}

absl::StatusOr<std::string> JobClient::Submit(const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  LS_ASSIGN_OR_RETURN(v1::SubmitJobResponse response,
                      Call(stub_.get(), &v1::Coordinator::Stub::SubmitJob, "SubmitJob", request,
                           rpc_timeout_, address_));
  return response.job_id();
}

absl::StatusOr<v1::GetJobResponse> JobClient::Get(const std::string& id) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  return Call(stub_.get(), &v1::Coordinator::Stub::GetJob, "GetJob", request, rpc_timeout_,
              address_);
}

absl::StatusOr<std::vector<v1::JobRecord>> JobClient::List(int limit) {
  v1::ListJobsRequest request;
  request.set_limit(limit);
  LS_ASSIGN_OR_RETURN(v1::ListJobsResponse response,
                      Call(stub_.get(), &v1::Coordinator::Stub::ListJobs, "ListJobs", request,
                           rpc_timeout_, address_));
  return std::vector<v1::JobRecord>(response.jobs().begin(), response.jobs().end());
}

absl::StatusOr<v1::JobRecord> JobClient::Cancel(const std::string& id, const std::string& reason) {
  v1::CancelJobRequest request;
  request.set_job_id(id);
  request.set_reason(reason);
  LS_ASSIGN_OR_RETURN(v1::CancelJobResponse response,
                      Call(stub_.get(), &v1::Coordinator::Stub::CancelJob, "CancelJob", request,
                           rpc_timeout_, address_));
  return response.job();
}

absl::StatusOr<v1::DrainWorkerResponse> JobClient::Drain(const std::string& task, bool undo) {
  std::vector<std::string> parts = absl::StrSplit(task, '/');
  int index = -1;
  if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &index) || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task: expected TYPE/INDEX such as worker/1, got \"", task, "\""));
  }
  v1::DrainWorkerRequest request;
  request.mutable_task()->set_type(parts[0]);
  request.mutable_task()->set_index(index);
  request.set_undo(undo);
  return Call(stub_.get(), &v1::Coordinator::Stub::DrainWorker, "DrainWorker", request,
              rpc_timeout_, address_);
}

absl::StatusOr<v1::JobEvent> JobClient::Watch(
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
    absl::Status status = FromGrpcStatus(reader->Finish(), absl::StrCat("WatchJob to ", address_));
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

}  // namespace client
}  // namespace lockstep

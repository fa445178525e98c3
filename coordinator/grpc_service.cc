#include "coordinator/grpc_service.h"

#include <thread>
#include <utility>

#include "common/grpc_status.h"
#include "common/incarnation.h"
#include "coordinator/grpc_stream_writer.h"
#include "coordinator/job_store/job_store.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {
namespace {

TaskRef FromProto(const v1::TaskId& t) { return TaskRef{t.type(), t.index()}; }

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

void ToProto(const ClusterMap& cluster, v1::ClusterSpec* out) {
  for (const auto& [type, addresses] : cluster) {
    auto& tasks = (*out->mutable_jobs())[type];
    for (const std::string& a : addresses) tasks.add_addresses(a);
  }
}

}  // namespace

CoordinatorService::CoordinatorService(Membership* membership, KvStore* kv, Barriers* barriers,
                                       JobService* jobs, Clock* clock, uint64_t incarnation)
    : membership_(membership),
      kv_(kv),
      barriers_(barriers),
      jobs_(jobs),
      clock_(clock),
      incarnation_(incarnation),
      start_(clock->Now()) {}

CoordinatorService::~CoordinatorService() { Shutdown(); }

void CoordinatorService::Shutdown() {
  kv_->Shutdown();
  barriers_->Shutdown();
  jobs_->Shutdown();
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &waiting_));
}

absl::Time CoordinatorService::DeadlineFor(int64_t timeout_ms) const {
  return clock_->Now() + absl::Milliseconds(std::max<int64_t>(0, timeout_ms));
}

void CoordinatorService::FinishLater(grpc::ServerUnaryReactor* reactor,
                                     std::function<absl::Status()> wait) {
  {
    absl::MutexLock l(&mu_);
    ++waiting_;
  }
  std::thread([this, reactor, wait = std::move(wait)] {
    reactor->Finish(ToGrpcStatus(wait()));
    absl::MutexLock l(&mu_);
    --waiting_;
  }).detach();
}

std::function<void()> CoordinatorService::EnterStream() {
  absl::MutexLock l(&mu_);
  ++waiting_;
  return [this] {
    absl::MutexLock l(&mu_);
    --waiting_;
  };
}

grpc::ServerUnaryReactor* CoordinatorService::RegisterWorker(
    grpc::CallbackServerContext* ctx, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  RegisterRequest r;
  if (request->has_task()) r.task = FromProto(request->task());
  r.address = request->address();
  r.devices.assign(request->devices().begin(), request->devices().end());
  r.incarnation = request->incarnation();
  absl::StatusOr<Registration> reg = membership_->Register(r);
  if (!reg.ok()) {
    spdlog::warn("RegisterWorker from {} refused: {}", ctx->peer(), reg.status().ToString());
    return Done(ctx, reg.status());
  }
  if (reg->replaced_incarnation != 0) {
    spdlog::info("{} registered, incarnation {} replaces {}", reg->task.ToString(),
                 ShortIncarnation(r.incarnation), ShortIncarnation(reg->replaced_incarnation));
  } else {
    spdlog::info("{} registered, incarnation {}, address {}, {} device(s)", reg->task.ToString(),
                 ShortIncarnation(r.incarnation), r.address, r.devices.size());
  }
  response->mutable_task()->set_type(reg->task.type);
  response->mutable_task()->set_index(reg->task.index);
  ToProto(reg->cluster, response->mutable_cluster());
  response->set_coordinator_incarnation(incarnation_);
  const MembershipOptions& o = membership_->options();
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(o.heartbeat_interval));
  response->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(o.heartbeat_timeout));
  response->set_tf_config(reg->tf_config);
  jobs_->Tick();  // a restarted worker fails its job; a new one may start a pending job
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                        const v1::HeartbeatRequest* request,
                                                        v1::HeartbeatResponse* response) {
  absl::Status s = membership_->Heartbeat(FromProto(request->task()), request->incarnation(),
                                          request->job_id(), request->step());
  if (s.ok() && request->jobs_size() > 0) {
    jobs_->OnReports(FromProto(request->task()),
                     std::vector<v1::JobReport>(request->jobs().begin(), request->jobs().end()));
  }
  response->set_coordinator_incarnation(incarnation_);
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* CoordinatorService::Deregister(grpc::CallbackServerContext* ctx,
                                                         const v1::DeregisterRequest* request,
                                                         v1::DeregisterResponse*) {
  absl::Status s = membership_->Deregister(FromProto(request->task()), request->incarnation());
  if (s.ok()) {
    spdlog::info("{} deregistered, incarnation {}", FromProto(request->task()).ToString(),
                 ShortIncarnation(request->incarnation()));
  }
  return Done(ctx, s);
}

grpc::ServerUnaryReactor* CoordinatorService::SetKey(grpc::CallbackServerContext* ctx,
                                                     const v1::SetKeyRequest* request,
                                                     v1::SetKeyResponse*) {
  return Done(ctx, kv_->Set(request->key(), request->value(), request->overwrite()));
}

grpc::ServerUnaryReactor* CoordinatorService::GetKey(grpc::CallbackServerContext* ctx,
                                                     const v1::GetKeyRequest* request,
                                                     v1::GetKeyResponse* response) {
  const absl::Time deadline = DeadlineFor(request->timeout_ms());
  if (request->timeout_ms() <= 0) {
    absl::StatusOr<std::string> v = kv_->Get(request->key(), deadline);
    if (v.ok()) response->set_value(*v);
    return Done(ctx, v.status());
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::string key = request->key();
  FinishLater(reactor, [this, key, deadline, response] {
    absl::StatusOr<std::string> v = kv_->Get(key, deadline);
    if (v.ok()) response->set_value(*v);
    return v.status();
  });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::Barrier(grpc::CallbackServerContext* ctx,
                                                      const v1::BarrierRequest* request,
                                                      v1::BarrierResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::vector<std::string> members(request->members().begin(), request->members().end());
  FinishLater(reactor, [this, id = request->barrier_id(), member = request->member(),
                        parties = request->parties(), members = std::move(members),
                        deadline = DeadlineFor(request->timeout_ms())] {
    return barriers_->Arrive(id, member, parties, members, deadline);
  });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetClusterStatus(
    grpc::CallbackServerContext* ctx, const v1::GetClusterStatusRequest*,
    v1::GetClusterStatusResponse* response) {
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
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorService::SubmitJob(grpc::CallbackServerContext* ctx,
                                                        const v1::SubmitJobRequest* request,
                                                        v1::SubmitJobResponse* response) {
  absl::StatusOr<std::string> id = jobs_->Submit(request->spec());
  if (!id.ok()) {
    spdlog::warn("SubmitJob \"{}\" from {} refused: {}", request->spec().name(), ctx->peer(),
                 std::string(id.status().message()));
    return Done(ctx, id.status());
  }
  spdlog::info("job {} (\"{}\") submitted", *id, request->spec().name());
  response->set_job_id(*id);
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorService::GetJob(grpc::CallbackServerContext* ctx,
                                                     const v1::GetJobRequest* request,
                                                     v1::GetJobResponse* response) {
  absl::StatusOr<v1::GetJobResponse> job = jobs_->Get(request->job_id());
  if (job.ok()) *response = std::move(*job);
  return Done(ctx, job.status());
}

grpc::ServerUnaryReactor* CoordinatorService::ListJobs(grpc::CallbackServerContext* ctx,
                                                       const v1::ListJobsRequest* request,
                                                       v1::ListJobsResponse* response) {
  absl::StatusOr<std::vector<v1::JobRecord>> jobs = jobs_->List(request->limit());
  if (jobs.ok()) {
    for (v1::JobRecord& j : *jobs) *response->add_jobs() = std::move(j);
  }
  return Done(ctx, jobs.status());
}

grpc::ServerUnaryReactor* CoordinatorService::CancelJob(grpc::CallbackServerContext* ctx,
                                                        const v1::CancelJobRequest* request,
                                                        v1::CancelJobResponse* response) {
  absl::StatusOr<v1::JobRecord> job = jobs_->Cancel(request->job_id(), request->reason());
  if (job.ok()) {
    spdlog::info("job {} cancelled: {}", request->job_id(), job->reason());
    *response->mutable_job() = std::move(*job);
  }
  return Done(ctx, job.status());
}

grpc::ServerWriteReactor<v1::JobEvent>* CoordinatorService::WatchJob(
    grpc::CallbackServerContext*, const v1::WatchJobRequest* request) {
  auto seen = std::make_shared<int64_t>(0);
  return StreamWriter<v1::JobEvent>::Start(
      [this, id = request->job_id(), seen](absl::Time deadline) {
        return jobs_->NextEvent(id, seen.get(), deadline);
      },
      [](const v1::JobEvent& e) { return JobStore::IsTerminal(e.job().state()); }, EnterStream());
}

grpc::ServerWriteReactor<v1::Assignment>* CoordinatorService::WatchAssignments(
    grpc::CallbackServerContext*, const v1::WatchAssignmentsRequest* request) {
  return StreamWriter<v1::Assignment>::Start(
      [this, task = FromProto(request->task()), incarnation = request->incarnation()](
          absl::Time deadline) { return jobs_->NextAssignment(task, incarnation, deadline); },
      [](const v1::Assignment&) { return false; }, EnterStream());
}

}  // namespace coordinator
}  // namespace lockstep

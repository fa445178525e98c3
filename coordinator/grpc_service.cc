#include "coordinator/grpc_service.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <utility>

#include "common/grpc_status.h"
#include "common/incarnation.h"
#include "coordinator/grpc_diagnostics.h"
#include "coordinator/grpc_stream_writer.h"
#include "coordinator/job_store/job_store.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {
namespace {

TaskRef FromProto(const v1::TaskId& t) { return TaskRef{t.type(), t.index()}; }

void ToProto(const ClusterMap& cluster, v1::ClusterSpec* out) {
  for (const auto& [type, addresses] : cluster) {
    auto& tasks = (*out->mutable_jobs())[type];
    for (const std::string& a : addresses) tasks.add_addresses(a);
  }
}

}  // namespace

CoordinatorService::CoordinatorService(Membership* membership, KvStore* kv, Barriers* barriers,
                                       JobService* jobs, Clock* clock, uint64_t incarnation,
                                       bool insecure, TokenTable tokens)
    : membership_(membership),
      kv_(kv),
      barriers_(barriers),
      jobs_(jobs),
      clock_(clock),
      incarnation_(incarnation),
      start_(clock->Now()),
      insecure_(insecure),
      tokens_(std::move(tokens)),
      diagnostics_(jobs, clock, {.heartbeat_interval = membership->options().heartbeat_interval}) {}

CoordinatorService::~CoordinatorService() { Shutdown(); }

void CoordinatorService::Shutdown() {
  kv_->Shutdown();
  barriers_->Shutdown();
  jobs_->Shutdown();
  diagnostics_.Shutdown();
}

absl::Time CoordinatorService::DeadlineFor(int64_t timeout_ms) const {
  return clock_->Now() + absl::Milliseconds(std::max<int64_t>(0, timeout_ms));
}

std::optional<Principal> CoordinatorService::Caller(grpc::ServerContext* ctx) const {
  // A certificate, when the peer presented one, was verified against the cluster CA in the
  // handshake (GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY).
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& subject :
         auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
      std::optional<Principal> p =
          PrincipalFromCertificate(absl::string_view(subject.data(), subject.size()));
      if (p.has_value()) return p;
    }
  }
  const auto& metadata = ctx->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  absl::ReaderMutexLock l(&tokens_mu_);
  return tokens_.FindBearer(absl::string_view(it->second.data(), it->second.size()));
}

void CoordinatorService::SetTokens(TokenTable tokens) {
  absl::MutexLock l(&tokens_mu_);
  tokens_ = std::move(tokens);
}

grpc::Status CoordinatorService::Authorize(grpc::ServerContext* ctx, const char* method,
                                           std::string* identity) const {
  if (insecure_) return grpc::Status::OK;
  std::optional<Principal> caller = Caller(ctx);
  absl::Status s = coordinator::Authorize(method, caller);
  if (!s.ok()) {
    spdlog::warn("{} from {} refused: {}", method, ctx->peer(), std::string(s.message()));
    return ToGrpcStatus(s);
  }
  if (identity != nullptr) *identity = caller->name;
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::AuthorizeTask(grpc::ServerContext* ctx, const char* method,
                                               const v1::TaskId& task) const {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, method, &identity); !s.ok()) return s;
  absl::Status held = membership_->CheckHolder(FromProto(task), identity, method);
  if (!held.ok()) {
    spdlog::warn("{} from {} refused: {}", method, ctx->peer(), std::string(held.message()));
  }
  return ToGrpcStatus(held);
}

grpc::Status CoordinatorService::RegisterWorker(grpc::ServerContext* ctx,
                                                const v1::RegisterWorkerRequest* request,
                                                v1::RegisterWorkerResponse* response) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  RegisterRequest r;
  if (request->has_task()) r.task = FromProto(request->task());
  r.address = request->address();
  r.devices.assign(request->devices().begin(), request->devices().end());
  r.incarnation = request->incarnation();
  r.identity = identity;
  absl::StatusOr<Registration> reg = membership_->Register(r);
  if (!reg.ok()) {
    spdlog::warn("RegisterWorker from {} refused: {}", ctx->peer(), reg.status().ToString());
    return ToGrpcStatus(reg.status());
  }
  if (reg->replaced_incarnation != 0) {
    spdlog::info("{} registered, incarnation {} replaces {}", reg->task.ToString(),
                 ShortIncarnation(r.incarnation), ShortIncarnation(reg->replaced_incarnation));
  } else {
    spdlog::info("{} registered, incarnation {}, address {}, {} device(s){}", reg->task.ToString(),
                 ShortIncarnation(r.incarnation), r.address, r.devices.size(),
                 identity.empty() ? "" : ", identity " + identity);
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
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* ctx,
                                           const v1::HeartbeatRequest* request,
                                           v1::HeartbeatResponse* response) {
  if (grpc::Status s = AuthorizeTask(ctx, __func__, request->task()); !s.ok()) return s;
  absl::Status s = membership_->Heartbeat(FromProto(request->task()), request->incarnation(),
                                          request->leaving());
  // Diagnostics first: a report that ends the job must find the worker's last log lines.
  if (s.ok() && request->diagnostics_size() > 0) {
    diagnostics_.OnHeartbeat(FromProto(request->task()),
                             {request->diagnostics().begin(), request->diagnostics().end()});
  }
  if (s.ok() && request->jobs_size() > 0) {
    jobs_->OnReports(FromProto(request->task()),
                     std::vector<v1::JobReport>(request->jobs().begin(), request->jobs().end()));
  }
  response->set_coordinator_incarnation(incarnation_);
  return ToGrpcStatus(s);
}

grpc::Status CoordinatorService::Deregister(grpc::ServerContext* ctx,
                                            const v1::DeregisterRequest* request,
                                            v1::DeregisterResponse*) {
  if (grpc::Status s = AuthorizeTask(ctx, __func__, request->task()); !s.ok()) return s;
  absl::Status s = membership_->Deregister(FromProto(request->task()), request->incarnation());
  if (s.ok()) {
    spdlog::info("{} deregistered, incarnation {}", FromProto(request->task()).ToString(),
                 ShortIncarnation(request->incarnation()));
  }
  return ToGrpcStatus(s);
}

grpc::Status CoordinatorService::SetKey(grpc::ServerContext* ctx, const v1::SetKeyRequest* request,
                                        v1::SetKeyResponse*) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  if (absl::Status s = jobs_->CheckKeyAccess(identity, request->key()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return ToGrpcStatus(kv_->Set(request->key(), request->value(), request->overwrite()));
}

grpc::Status CoordinatorService::GetKey(grpc::ServerContext* ctx, const v1::GetKeyRequest* request,
                                        v1::GetKeyResponse* response) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  if (absl::Status s = jobs_->CheckKeyAccess(identity, request->key()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<std::string> v = kv_->Get(request->key(), DeadlineFor(request->timeout_ms()));
  if (v.ok()) response->set_value(*v);
  return ToGrpcStatus(v.status());
}

grpc::Status CoordinatorService::Barrier(grpc::ServerContext* ctx,
                                         const v1::BarrierRequest* request, v1::BarrierResponse*) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  if (absl::Status s = jobs_->CheckKeyAccess(identity, request->barrier_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  std::vector<std::string> members(request->members().begin(), request->members().end());
  return ToGrpcStatus(barriers_->Arrive(request->barrier_id(), request->member(),
                                        request->parties(), members,
                                        DeadlineFor(request->timeout_ms())));
}

grpc::Status CoordinatorService::GetClusterStatus(grpc::ServerContext* ctx,
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
  response->set_insecure(insecure_);
  diagnostics_.Annotate(response);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::SubmitJob(grpc::ServerContext* ctx,
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

grpc::Status CoordinatorService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* request,
                                        v1::GetJobResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<v1::GetJobResponse> job = jobs_->Get(request->job_id());
  if (job.ok()) {
    *response = std::move(*job);
    diagnostics_.Annotate(response);
  }
  return ToGrpcStatus(job.status());
}

grpc::Status CoordinatorService::ListJobs(grpc::ServerContext* ctx,
                                          const v1::ListJobsRequest* request,
                                          v1::ListJobsResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  absl::StatusOr<std::vector<v1::JobRecord>> jobs = jobs_->List(request->limit());
  if (jobs.ok()) {
    for (v1::JobRecord& j : *jobs) *response->add_jobs() = std::move(j);
  }
  return ToGrpcStatus(jobs.status());
}

grpc::Status CoordinatorService::CancelJob(grpc::ServerContext* ctx,
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

grpc::Status CoordinatorService::DrainWorker(grpc::ServerContext* ctx,
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

grpc::Status CoordinatorService::WatchJob(grpc::ServerContext* ctx,
                                          const v1::WatchJobRequest* request,
                                          grpc::ServerWriter<v1::JobEvent>* writer) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  int64_t seen = 0;
  return ServeStream<v1::JobEvent>(
      ctx, writer,
      [&](absl::Time deadline) { return jobs_->NextEvent(request->job_id(), &seen, deadline); },
      [](const v1::JobEvent& e) { return JobStore::IsTerminal(e.job().state()); });
}

grpc::Status CoordinatorService::WatchAssignments(grpc::ServerContext* ctx,
                                                  const v1::WatchAssignmentsRequest* request,
                                                  grpc::ServerWriter<v1::Assignment>* writer) {
  if (grpc::Status s = AuthorizeTask(ctx, __func__, request->task()); !s.ok()) {
    return s;
  }
  const TaskRef task = FromProto(request->task());
  return ServeStream<v1::Assignment>(
      ctx, writer,
      [&](absl::Time deadline) {
        return jobs_->NextAssignment(task, request->incarnation(), deadline);
      },
      [](const v1::Assignment&) { return false; });
}

grpc::Status CoordinatorService::DumpJob(grpc::ServerContext* ctx,
                                         const v1::DumpJobRequest* request,
                                         v1::DumpJobResponse* response) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  return ServeDumpJob(diagnostics_, *request, response);
}

grpc::Status CoordinatorService::GetJobLogs(grpc::ServerContext* ctx,
                                            const v1::GetJobLogsRequest* request,
                                            grpc::ServerWriter<v1::JobLogLines>* writer) {
  if (grpc::Status s = Authorize(ctx, __func__); !s.ok()) return s;
  return ServeJobLogs(diagnostics_, ctx, *request, writer);
}

}  // namespace coordinator
}  // namespace lockstep

#include "coordinator/grpc_worker_service.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/cluster_proto.h"
#include "common/grpc_status.h"
#include "common/incarnation.h"
#include "coordinator/grpc_stream_writer.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

GrpcWorkerService::GrpcWorkerService(Membership* membership, KvStore* kv, Barriers* barriers,
                                     JobService* jobs, DiagnosticsService* diagnostics,
                                     Clock* clock, uint64_t incarnation,
                                     const GrpcAuthorizer* authorizer, CheckpointFetch* fetch)
    : membership_(membership),
      kv_(kv),
      barriers_(barriers),
      jobs_(jobs),
      diagnostics_(diagnostics),
      fetch_(fetch),
      clock_(clock),
      incarnation_(incarnation),
      authorizer_(authorizer) {}

absl::Time GrpcWorkerService::DeadlineFor(int64_t timeout_ms) const {
  return clock_->Now() + absl::Milliseconds(std::max<int64_t>(0, timeout_ms));
}

grpc::Status GrpcWorkerService::Authorize(grpc::ServerContext* ctx, const char* method,
                                          std::string* identity) const {
  return authorizer_->Authorize(ctx, coordinator::Service::kWorker, method, identity);
}

grpc::Status GrpcWorkerService::AuthorizeTask(grpc::ServerContext* ctx, const char* method,
                                              const v1::TaskId& task,
                                              std::string* identity_out) const {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, method, &identity); !s.ok()) return s;
  if (identity_out != nullptr) *identity_out = identity;
  absl::Status held = membership_->CheckHolder(FromProto(task), identity, method);
  if (!held.ok()) {
    spdlog::warn("{} from {} refused: {}", method, ctx->peer(), std::string(held.message()));
  }
  return ToGrpcStatus(held);
}

grpc::Status GrpcWorkerService::AuthorizeKey(grpc::ServerContext* ctx, const char* method,
                                             const std::string& key, std::string* caller) const {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, method, &identity); !s.ok()) return s;
  if (caller != nullptr) *caller = identity.empty() ? ctx->peer() : identity;
  return ToGrpcStatus(jobs_->CheckKeyAccess(identity, key));
}

grpc::Status GrpcWorkerService::RegisterWorker(grpc::ServerContext* ctx,
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
  r.protocol_version = request->protocol_version();  // 0 from a worker that sends none
  absl::StatusOr<Registration> reg = membership_->Register(r);
  if (!reg.ok()) {
    spdlog::warn("RegisterWorker from {} refused: {}", ctx->peer(), reg.status().ToString());
    return ToGrpcStatus(reg.status());
  }
  for (const TaskRef& other : reg->address_shared_with) {
    spdlog::warn(
        "{} (identity {}) registered address {}, which {} of another identity uses too; "
        "one of them is misconfigured or impersonating the other",
        reg->task.ToString(), identity, r.address, other.ToString());
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
  jobs_->Tick();  // a restarted worker fails its job; a new one may start a pending job
  return grpc::Status::OK;
}

grpc::Status GrpcWorkerService::Heartbeat(grpc::ServerContext* ctx,
                                          const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  if (grpc::Status s = AuthorizeTask(ctx, __func__, request->task()); !s.ok()) return s;
  bool drained = false;
  absl::Status s = membership_->Heartbeat(FromProto(request->task()), request->incarnation(),
                                          request->leaving(), &drained);
  // Diagnostics first: a report that ends the job must find the worker's last log lines.
  if (s.ok() && request->diagnostics_size() > 0) {
    diagnostics_->OnHeartbeat(FromProto(request->task()),
                              {request->diagnostics().begin(), request->diagnostics().end()});
  }
  if (s.ok() && request->jobs_size() > 0) {
    jobs_->OnReports(FromProto(request->task()),
                     std::vector<v1::JobReport>(request->jobs().begin(), request->jobs().end()));
  }
  response->set_coordinator_incarnation(incarnation_);
  response->set_drained(drained);
  return ToGrpcStatus(s);
}

grpc::Status GrpcWorkerService::Deregister(grpc::ServerContext* ctx,
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

grpc::Status GrpcWorkerService::SetKey(grpc::ServerContext* ctx, const v1::SetKeyRequest* request,
                                       v1::SetKeyResponse*) {
  if (grpc::Status s = AuthorizeKey(ctx, __func__, request->key()); !s.ok()) return s;
  return ToGrpcStatus(kv_->Set(request->key(), request->value(), request->overwrite()));
}

grpc::Status GrpcWorkerService::GetKey(grpc::ServerContext* ctx, const v1::GetKeyRequest* request,
                                       v1::GetKeyResponse* response) {
  std::string caller;
  if (grpc::Status s = AuthorizeKey(ctx, __func__, request->key(), &caller); !s.ok()) return s;
  absl::StatusOr<std::string> v =
      kv_->Get(request->key(), DeadlineFor(request->timeout_ms()), caller);
  if (v.ok()) response->set_value(*v);
  return ToGrpcStatus(v.status());
}

grpc::Status GrpcWorkerService::Barrier(grpc::ServerContext* ctx, const v1::BarrierRequest* request,
                                        v1::BarrierResponse*) {
  std::string caller;
  if (grpc::Status s = AuthorizeKey(ctx, __func__, request->barrier_id(), &caller); !s.ok()) {
    return s;
  }
  std::vector<std::string> members(request->members().begin(), request->members().end());
  return ToGrpcStatus(barriers_->Arrive(request->barrier_id(), request->member(),
                                        request->parties(), members,
                                        DeadlineFor(request->timeout_ms()), caller));
}

grpc::Status GrpcWorkerService::UploadCheckpoint(
    grpc::ServerContext* ctx, grpc::ServerReader<v1::CheckpointUploadChunk>* reader,
    v1::UploadCheckpointResponse*) {
  std::string identity;
  if (grpc::Status s = Authorize(ctx, __func__, &identity); !s.ok()) return s;
  if (fetch_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no fetches here");
  absl::Status s =
      fetch_->Upload(identity, [reader](v1::CheckpointUploadChunk* m) { return reader->Read(m); });
  if (!s.ok()) spdlog::warn("UploadCheckpoint from {}: {}", ctx->peer(), s.ToString());
  return ToGrpcStatus(s);
}

grpc::Status GrpcWorkerService::WatchAssignments(grpc::ServerContext* ctx,
                                                 const v1::WatchAssignmentsRequest* request,
                                                 grpc::ServerWriter<v1::Assignment>* writer) {
  std::string identity;
  if (grpc::Status s = AuthorizeTask(ctx, __func__, request->task(), &identity); !s.ok()) {
    return s;
  }
  const TaskRef task = FromProto(request->task());
  absl::StatusOr<WatchLimits::Slot> mine = jobs_->watches().OpenIdentityStream(identity);
  if (!mine.ok()) return ToGrpcStatus(mine.status());
  absl::StatusOr<WatchLimits::Slot> slot = jobs_->watches().OpenAssignmentWatch(task.ToString());
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  uint64_t generation = authorizer_->generation();
  const char* method = __func__;
  return ServeStream<v1::Assignment>(
      ctx, writer,
      [&](absl::Time deadline) {
        return jobs_->NextAssignment(task, request->incarnation(), deadline);
      },
      [](const v1::Assignment&) { return false; },
      [&] {
        return authorizer_->Reauthorize(ctx, coordinator::Service::kWorker, method, &generation);
      });
}

}  // namespace coordinator
}  // namespace lockstep

#include "worker/grpc_worker_service_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/status.h"

namespace lockstep {
namespace worker {
absl::StatusOr<std::unique_ptr<GrpcWorkerServiceClient>> GrpcWorkerServiceClient::Create(
    const std::string& address, const TlsOptions& tls, absl::Duration rpc_timeout) {
  LS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, CoordinatorChannel(address, tls));
  return std::unique_ptr<GrpcWorkerServiceClient>(
      new GrpcWorkerServiceClient(address, rpc_timeout, v1::WorkerService::NewStub(channel)));
}

absl::StatusOr<v1::RegisterWorkerResponse> GrpcWorkerServiceClient::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  // Fails fast (UNAVAILABLE naming a refused handshake); the heartbeats drive reconnects.
  return Call(&v1::WorkerService::Stub::AsyncRegisterWorker, "RegisterWorker", request,
              rpc_timeout_);
}

absl::StatusOr<v1::HeartbeatResponse> GrpcWorkerServiceClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  return Call(&v1::WorkerService::Stub::AsyncHeartbeat, "Heartbeat", request,
              std::min(rpc_timeout_, kReconnectWait), /*wait_for_ready=*/true);
}

absl::Status GrpcWorkerServiceClient::Deregister(const v1::DeregisterRequest& request) {
  return Call(&v1::WorkerService::Stub::AsyncDeregister, "Deregister", request, rpc_timeout_)
      .status();
}

absl::Status GrpcWorkerServiceClient::SetKey(const std::string& key, const std::string& value,
                                             bool overwrite) {
  v1::SetKeyRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_overwrite(overwrite);
  return Call(&v1::WorkerService::Stub::AsyncSetKey, "SetKey", request, rpc_timeout_).status();
}

absl::StatusOr<std::string> GrpcWorkerServiceClient::GetKey(const std::string& key,
                                                            absl::Duration timeout) {
  v1::GetKeyRequest request;
  request.set_key(key);
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  // The coordinator answers by the timeout; the RPC deadline leaves room for the network.
  LS_ASSIGN_OR_RETURN(v1::GetKeyResponse response, Call(&v1::WorkerService::Stub::AsyncGetKey,
                                                        "GetKey", request, timeout + rpc_timeout_));
  return std::move(*response.mutable_value());
}

absl::Status GrpcWorkerServiceClient::Barrier(const v1::BarrierRequest& request) {
  return Call(&v1::WorkerService::Stub::AsyncBarrier, "Barrier", request,
              absl::Milliseconds(request.timeout_ms()) + rpc_timeout_)
      .status();
}

namespace {

// A WatchAssignments call: the context (for TryCancel) and the reader.
class GrpcAssignmentStream final : public AssignmentStream {
 public:
  GrpcAssignmentStream(v1::WorkerService::Stub* stub, const v1::WatchAssignmentsRequest& request,
                       std::string address)
      : address_(std::move(address)), reader_(stub->WatchAssignments(&ctx_, request)) {}
  ~GrpcAssignmentStream() override {
    ctx_.TryCancel();
    if (!finished_) reader_->Finish().ok();
  }

  absl::StatusOr<std::optional<v1::Assignment>> Next() override {
    if (finished_) return std::optional<v1::Assignment>();
    v1::Assignment a;
    if (reader_->Read(&a)) return std::optional<v1::Assignment>(std::move(a));
    finished_ = true;
    grpc::Status s = reader_->Finish();
    if (s.ok() || s.error_code() == grpc::StatusCode::CANCELLED) {
      return std::optional<v1::Assignment>();
    }
    return FromGrpcStatus(s, absl::StrCat("WatchAssignments from coordinator ", address_));
  }
  void Cancel() override { ctx_.TryCancel(); }

 private:
  const std::string address_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::Assignment>> reader_;
  bool finished_ = false;  // Next()'s thread only
};

}  // namespace

absl::StatusOr<std::unique_ptr<AssignmentStream>> GrpcWorkerServiceClient::WatchAssignments(
    const v1::WatchAssignmentsRequest& request) {
  return std::unique_ptr<AssignmentStream>(
      std::make_unique<GrpcAssignmentStream>(stub_.get(), request, address_));
}

}  // namespace worker
}  // namespace lockstep

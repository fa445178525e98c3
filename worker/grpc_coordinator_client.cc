#include "worker/grpc_coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/net.h"
#include "common/status.h"

namespace lockstep {
namespace worker {
namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcCoordinatorClient>> GrpcCoordinatorClient::Create(
    const std::string& address, absl::Duration rpc_timeout) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return Annotate(hp.status(), "coordinator address");
  grpc::ChannelArguments args;
  // Reconnect quickly after the coordinator restarts (gRPC's default backoff reaches 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  return std::unique_ptr<GrpcCoordinatorClient>(
      new GrpcCoordinatorClient(address, rpc_timeout, v1::Coordinator::NewStub(channel)));
}

absl::StatusOr<v1::RegisterWorkerResponse> GrpcCoordinatorClient::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, rpc_timeout_);
  v1::RegisterWorkerResponse response;
  grpc::Status s = stub_->RegisterWorker(&ctx, request, &response);
  LS_RETURN_IF_ERROR(FromGrpcStatus(s, absl::StrCat("RegisterWorker to coordinator ", address_)));
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> GrpcCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, rpc_timeout_);
  v1::HeartbeatResponse response;
  grpc::Status s = stub_->Heartbeat(&ctx, request, &response);
  LS_RETURN_IF_ERROR(FromGrpcStatus(s, absl::StrCat("Heartbeat to coordinator ", address_)));
  return response;
}

absl::Status GrpcCoordinatorClient::Deregister(const v1::DeregisterRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, rpc_timeout_);
  v1::DeregisterResponse response;
  return FromGrpcStatus(stub_->Deregister(&ctx, request, &response),
                        absl::StrCat("Deregister to coordinator ", address_));
}

absl::Status GrpcCoordinatorClient::SetKey(const std::string& key, const std::string& value,
                                           bool overwrite) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, rpc_timeout_);
  v1::SetKeyRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_overwrite(overwrite);
  v1::SetKeyResponse response;
  return FromGrpcStatus(stub_->SetKey(&ctx, request, &response),
                        absl::StrCat("SetKey to coordinator ", address_));
}

absl::StatusOr<std::string> GrpcCoordinatorClient::GetKey(const std::string& key,
                                                          absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout + rpc_timeout_);
  v1::GetKeyRequest request;
  request.set_key(key);
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  v1::GetKeyResponse response;
  grpc::Status s = stub_->GetKey(&ctx, request, &response);
  LS_RETURN_IF_ERROR(FromGrpcStatus(s, absl::StrCat("GetKey to coordinator ", address_)));
  return std::move(*response.mutable_value());
}

absl::Status GrpcCoordinatorClient::Barrier(const v1::BarrierRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, absl::Milliseconds(request.timeout_ms()) + rpc_timeout_);
  v1::BarrierResponse response;
  return FromGrpcStatus(stub_->Barrier(&ctx, request, &response),
                        absl::StrCat("Barrier to coordinator ", address_));
}

absl::StatusOr<v1::GetClusterStatusResponse> GrpcCoordinatorClient::GetClusterStatus() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, rpc_timeout_);
  v1::GetClusterStatusResponse response;
  grpc::Status s = stub_->GetClusterStatus(&ctx, v1::GetClusterStatusRequest(), &response);
  LS_RETURN_IF_ERROR(FromGrpcStatus(s, absl::StrCat("GetClusterStatus to coordinator ", address_)));
  return response;
}

}  // namespace worker
}  // namespace lockstep

#include "worker/grpc_coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/net.h"
#include "common/status.h"

namespace lockstep {
namespace worker {
absl::StatusOr<std::unique_ptr<GrpcCoordinatorClient>> GrpcCoordinatorClient::Create(
    const std::string& address, absl::Duration rpc_timeout) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return Annotate(hp.status(), "coordinator address");
  grpc::ChannelArguments args;
  // Reconnect quickly after the coordinator restarts (gRPC's default backoff reaches 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Callers decide about retries (the agent backs off, the CLI reports); gRPC's own retry
  // filter would only add per-call buffering.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  return std::unique_ptr<GrpcCoordinatorClient>(
      new GrpcCoordinatorClient(address, rpc_timeout, v1::Coordinator::NewStub(channel)));
}

absl::StatusOr<v1::RegisterWorkerResponse> GrpcCoordinatorClient::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  return Call(&v1::Coordinator::Stub::RegisterWorker, "RegisterWorker", request, rpc_timeout_);
}

absl::StatusOr<v1::HeartbeatResponse> GrpcCoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  return Call(&v1::Coordinator::Stub::Heartbeat, "Heartbeat", request, rpc_timeout_);
}

absl::Status GrpcCoordinatorClient::Deregister(const v1::DeregisterRequest& request) {
  return Call(&v1::Coordinator::Stub::Deregister, "Deregister", request, rpc_timeout_).status();
}

absl::Status GrpcCoordinatorClient::SetKey(const std::string& key, const std::string& value,
                                           bool overwrite) {
  v1::SetKeyRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_overwrite(overwrite);
  return Call(&v1::Coordinator::Stub::SetKey, "SetKey", request, rpc_timeout_).status();
}

absl::StatusOr<std::string> GrpcCoordinatorClient::GetKey(const std::string& key,
                                                          absl::Duration timeout) {
  v1::GetKeyRequest request;
  request.set_key(key);
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  // The coordinator answers by the timeout; the RPC deadline leaves room for the network.
  LS_ASSIGN_OR_RETURN(v1::GetKeyResponse response, Call(&v1::Coordinator::Stub::GetKey, "GetKey",
                                                        request, timeout + rpc_timeout_));
  return std::move(*response.mutable_value());
}

absl::Status GrpcCoordinatorClient::Barrier(const v1::BarrierRequest& request) {
  return Call(&v1::Coordinator::Stub::Barrier, "Barrier", request,
              absl::Milliseconds(request.timeout_ms()) + rpc_timeout_)
      .status();
}

absl::StatusOr<v1::GetClusterStatusResponse> GrpcCoordinatorClient::GetClusterStatus() {
  return Call(&v1::Coordinator::Stub::GetClusterStatus, "GetClusterStatus",
              v1::GetClusterStatusRequest(), rpc_timeout_);
}

}  // namespace worker
}  // namespace lockstep

#include "common/health_check.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace lockstep {

absl::StatusOr<HealthStatus> CheckHealth(const std::string& address, const std::string& service,
                                         absl::Duration timeout) {
  if (service.size() > 127) {
    return absl::InvalidArgumentError("CheckHealth: service names longer than 127 bytes");
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  // HealthCheckRequest { string service = 1; }
  std::string request;
  if (!service.empty()) {
    request.push_back('\x0a');
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const grpc::internal::RpcMethod method("/grpc.health.v1.Health/Check",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), method, &context, in, &out);
  if (!status.ok()) {
    return FromGrpcStatus(status, absl::StrCat("health check of ", address));
  }
  std::vector<grpc::Slice> slices;
  std::string response;
  if (out.Valid() && out.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      response.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  // HealthCheckResponse { ServingStatus status = 1; }: empty when UNKNOWN (0).
  if (response.empty()) return HealthStatus::kUnknown;
  if (response.size() != 2 || response[0] != '\x08' || response[1] < 0 || response[1] > 3) {
    return absl::InternalError(
        absl::StrCat("health check of ", address, ": not a HealthCheckResponse"));
  }
  return static_cast<HealthStatus>(response[1]);
}

}  // namespace lockstep

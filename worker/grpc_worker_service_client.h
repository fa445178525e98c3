// GrpcWorkerServiceClient: WorkerServiceClient over a gRPC channel to lockstep-coordinator's
// lockstep.v1.WorkerService (lockstepd's client; it needs a daemon certificate).
// Every call carries a deadline (`rpc_timeout`, plus the wait for GetKey and Barrier) and
// fails fast when the coordinator is down (no wait-for-ready, but for heartbeats), so
// callers decide how to retry. Unary calls go through common/grpc_unary_call.h.
// Ownership: owns the channel and stub. Thread model: thread-safe (gRPC stubs are).
#ifndef LOCKSTEP_WORKER_GRPC_WORKER_SERVICE_CLIENT_H_
#define LOCKSTEP_WORKER_GRPC_WORKER_SERVICE_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/grpc_unary_call.h"
#include "common/tls_options.h"
#include "lockstep/v1/coordinator.grpc.pb.h"
#include "worker/worker_service_client.h"

namespace lockstep {
namespace worker {

class GrpcWorkerServiceClient final : public WorkerServiceClient {
 public:
  // `address`: "host:port". INVALID_ARGUMENT when it is not one. Does not connect yet.
  // `tls`: the channel's security (common/grpc_channel.h): a daemon's certificate.
  static absl::StatusOr<std::unique_ptr<GrpcWorkerServiceClient>> Create(
      const std::string& address, const TlsOptions& tls,
      absl::Duration rpc_timeout = absl::Seconds(3));

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  absl::Status Deregister(const v1::DeregisterRequest& request) override;
  absl::Status SetKey(const std::string& key, const std::string& value, bool overwrite) override;
  absl::StatusOr<std::string> GetKey(const std::string& key, absl::Duration timeout) override;
  absl::Status Barrier(const v1::BarrierRequest& request) override;
  absl::StatusOr<std::unique_ptr<AssignmentStream>> WatchAssignments(
      const v1::WatchAssignmentsRequest& request) override;
  std::string address() const override { return address_; }

 private:
  // One unary call (common/grpc_unary_call.h) with a deadline `timeout` from now; errors
  // name `name` and the address. `wait_for_ready`: a pending call is what drives gRPC to
  // reconnect, so a restarted coordinator is found within the reconnect backoff (<= 1 s)
  // instead of gRPC's 5 s background poll.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> (
                                    v1::WorkerService::Stub::*start)(grpc::ClientContext*,
                                                                     const Request&,
                                                                     grpc::CompletionQueue*),
                                const char* name, const Request& request, absl::Duration timeout,
                                bool wait_for_ready = false) {
    return UnaryCall(stub_.get(), start, request, timeout,
                     absl::StrCat(name, " to coordinator ", address_), wait_for_ready);
  }

  GrpcWorkerServiceClient(std::string address, absl::Duration rpc_timeout,
                          std::unique_ptr<v1::WorkerService::Stub> stub)
      : address_(std::move(address)), rpc_timeout_(rpc_timeout), stub_(std::move(stub)) {}

  // How long heartbeats wait for a channel that is reconnecting: one
  // heartbeat interval's worth, so the agent's own loop (retries, LOST detection) keeps its
  // pace.
  static constexpr absl::Duration kReconnectWait = absl::Seconds(1);

  const std::string address_;
  const absl::Duration rpc_timeout_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_GRPC_WORKER_SERVICE_CLIENT_H_

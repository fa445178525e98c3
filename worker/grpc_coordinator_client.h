// GrpcCoordinatorClient: CoordinatorClient over a gRPC channel to lockstep-coordinator.
// Every call carries a deadline (`rpc_timeout`, plus the wait for GetKey and Barrier) and
// fails fast when the coordinator is down (no wait-for-ready), so callers decide how to
// retry. Errors are converted once, by common/grpc_status.h.
// Ownership: owns the channel and stub. Thread model: thread-safe (gRPC stubs are).
#ifndef LOCKSTEP_WORKER_GRPC_COORDINATOR_CLIENT_H_
#define LOCKSTEP_WORKER_GRPC_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/tls_options.h"
#include "lockstep/v1/coordinator.grpc.pb.h"
#include "worker/coordinator_client.h"

namespace lockstep {
namespace worker {

class GrpcCoordinatorClient final : public CoordinatorClient {
 public:
  // `address`: "host:port". INVALID_ARGUMENT when it is not one. Does not connect yet.
  // `tls`: the channel's security (common/grpc_channel.h): a daemon's certificate, or a
  // client's token.
  static absl::StatusOr<std::unique_ptr<GrpcCoordinatorClient>> Create(
      const std::string& address, const TlsOptions& tls,
      absl::Duration rpc_timeout = absl::Seconds(3));

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  absl::Status Deregister(const v1::DeregisterRequest& request) override;
  absl::Status SetKey(const std::string& key, const std::string& value, bool overwrite) override;
  absl::StatusOr<std::string> GetKey(const std::string& key, absl::Duration timeout) override;
  absl::Status Barrier(const v1::BarrierRequest& request) override;
  absl::StatusOr<v1::GetClusterStatusResponse> GetClusterStatus() override;
  absl::StatusOr<std::unique_ptr<AssignmentStream>> WatchAssignments(
      const v1::WatchAssignmentsRequest& request) override;
  std::string address() const override { return address_; }

 private:
  // One unary call with a deadline `timeout` from now; errors name `name` and the address.
  // The calling thread spins on the call's completion queue for up to kSpinBeforeBlocking
  // before it blocks: a coordinator answers in well under that, and a thread that blocked
  // costs a wake-up on the answer (on a VM, where an idle vCPU halts, ~60 us of the ~160 us
  // a GetClusterStatus took on loopback). The spin is bounded, so a slow call costs at most
  // that much CPU more. `wait_for_ready`: while the channel is not connected (the
  // coordinator restarting), wait for it up to the deadline instead of failing at once; a
  // pending call is what drives gRPC to reconnect, so a restarted coordinator is found
  // within the reconnect backoff (<= 1 s) instead of gRPC's 5 s background poll.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> (
                                    v1::Coordinator::Stub::*start)(grpc::ClientContext*,
                                                                   const Request&,
                                                                   grpc::CompletionQueue*),
                                const char* name, const Request& request, absl::Duration timeout,
                                bool wait_for_ready = false) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    ctx.set_wait_for_ready(wait_for_ready);
    grpc::CompletionQueue cq;
    Response response;
    grpc::Status s;
    std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> call =
        (stub_.get()->*start)(&ctx, request, &cq);
    call->Finish(&response, &s, &response);
    WaitForOne(&cq);
    if (!s.ok()) {
      return FromGrpcStatus(s, absl::StrCat(name, " to coordinator ", address_));
    }
    return response;
  }
  // Waits (spinning first) for the one operation pending on `cq`, then shuts `cq` down.
  static void WaitForOne(grpc::CompletionQueue* cq);

  GrpcCoordinatorClient(std::string address, absl::Duration rpc_timeout,
                        std::unique_ptr<v1::Coordinator::Stub> stub)
      : address_(std::move(address)), rpc_timeout_(rpc_timeout), stub_(std::move(stub)) {}

  static constexpr absl::Duration kSpinBeforeBlocking = absl::Microseconds(250);
  // How long heartbeats wait for a channel that is reconnecting: one
  // heartbeat interval's worth, so the agent's own loop (retries, LOST detection) keeps its
  // pace.
  static constexpr absl::Duration kReconnectWait = absl::Seconds(1);

  const std::string address_;
  const absl::Duration rpc_timeout_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_GRPC_COORDINATOR_CLIENT_H_

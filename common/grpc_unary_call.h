// UnaryCall: one unary gRPC call to the coordinator, the way both of its clients make it
// (lockstepd's worker/grpc_worker_service_client and the CLI's client/job_service_client): a
// deadline `timeout` from now, its own completion queue, and the error converted once
// (common/grpc_status.h) with `context` ("Heartbeat to coordinator 10.0.0.1:7000")
// prepended.
//
// The calling thread spins on the completion queue for up to kSpinBeforeBlocking before it
// blocks: a coordinator answers in well under that, and a thread that blocked costs a
// wake-up on the answer (what that costs, measured: bench/control_plane_tuning.md). The spin
// is bounded, so a slow call costs at most that much CPU more. `wait_for_ready`: while the channel
// is not connected (the coordinator restarting), wait for it up to the deadline instead of failing
// at once; a pending call is what drives gRPC to reconnect.
//
// Thread model: any thread; calls are independent.
#ifndef LOCKSTEP_COMMON_GRPC_UNARY_CALL_H_
#define LOCKSTEP_COMMON_GRPC_UNARY_CALL_H_

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"

namespace lockstep {

inline constexpr absl::Duration kSpinBeforeBlocking = absl::Microseconds(250);

// Waits (spinning first) for the one operation pending on `cq`, then shuts `cq` down.
void WaitForOne(grpc::CompletionQueue* cq);

// `start` is the stub's Async<Method> (v1::JobService::Stub::AsyncGetJob).
template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> UnaryCall(Stub* stub,
                                   std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> (
                                       Stub::*start)(grpc::ClientContext*, const Request&,
                                                     grpc::CompletionQueue*),
                                   const Request& request, absl::Duration timeout,
                                   absl::string_view context, bool wait_for_ready = false) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx.set_wait_for_ready(wait_for_ready);
  grpc::CompletionQueue cq;
  Response response;
  grpc::Status s;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> call =
      (stub->*start)(&ctx, request, &cq);
  call->Finish(&response, &s, &response);
  WaitForOne(&cq);
  if (!s.ok()) return FromGrpcStatus(s, context);
  return response;
}

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_GRPC_UNARY_CALL_H_

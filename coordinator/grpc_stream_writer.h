// ServeStream: the body of a server-streaming handler on gRPC's synchronous API, fed by a
// blocking "next message" function. It calls `next(deadline)` in a loop on the handler's
// thread: a message is written (Write blocks until gRPC has taken it), DEADLINE_EXCEEDED
// means "nothing yet" (the loop checks whether the client went away and asks again), any
// other error ends the stream with that status; after a message for which `last` holds,
// the stream ends OK. Before each call of `next` it asks `allowed()` (the caller's
// authorization, GrpcAuthorizer::Reauthorize): an error ends the stream with it, so a revoked
// token's stream ends within one `poll`. Used by WatchAssignments (grpc_worker_service.cc),
// WatchJob (grpc_job_service.cc) and GetJobLogs (grpc_diagnostics.cc).
//
// `poll` bounds how long a client that went away (or a server shutting down) keeps the
// thread. Thread model: runs on the calling handler thread only.
#ifndef LOCKSTEP_COORDINATOR_GRPC_STREAM_WRITER_H_
#define LOCKSTEP_COORDINATOR_GRPC_STREAM_WRITER_H_

#include <grpcpp/grpcpp.h>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"

namespace lockstep {
namespace coordinator {

template <typename T>
grpc::Status ServeStream(grpc::ServerContext* ctx, grpc::ServerWriter<T>* writer,
                         absl::FunctionRef<absl::StatusOr<T>(absl::Time deadline)> next,
                         absl::FunctionRef<bool(const T&)> last,
                         absl::FunctionRef<grpc::Status()> allowed,
                         absl::Duration poll = absl::Milliseconds(200)) {
  while (!ctx->IsCancelled()) {
    if (grpc::Status s = allowed(); !s.ok()) return s;
    absl::StatusOr<T> message = next(absl::Now() + poll);
    if (!message.ok()) {
      if (message.status().code() == absl::StatusCode::kDeadlineExceeded) continue;
      return ToGrpcStatus(message.status());
    }
    if (!writer->Write(*message)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    if (last(*message)) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
}

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_STREAM_WRITER_H_

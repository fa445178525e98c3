// The bodies of the diagnostics RPCs (DumpJob, GetJobLogs) over a DiagnosticsService, so
// that the service class that serves them only authorizes the caller and calls these.
// Thread model: each runs on its handler's thread; GetJobLogs blocks it while following.
#ifndef LOCKSTEP_COORDINATOR_GRPC_DIAGNOSTICS_H_
#define LOCKSTEP_COORDINATOR_GRPC_DIAGNOSTICS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/functional/function_ref.h"
#include "coordinator/diagnostics_service.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace coordinator {

grpc::Status ServeDumpJob(DiagnosticsService& diagnostics, const v1::DumpJobRequest& request,
                          v1::DumpJobResponse* response);

// Streams the job's log lines; with `follow`, new ones until the job ended. The last message
// has `end` set. `allowed` as ServeStream's (the caller's authorization, asked again).
grpc::Status ServeJobLogs(DiagnosticsService& diagnostics, grpc::ServerContext* ctx,
                          const v1::GetJobLogsRequest& request,
                          grpc::ServerWriter<v1::JobLogLines>* writer,
                          absl::FunctionRef<grpc::Status()> allowed);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_DIAGNOSTICS_H_

#include "coordinator/grpc_diagnostics.h"

#include "common/grpc_status.h"
#include "coordinator/grpc_stream_writer.h"

namespace lockstep {
namespace coordinator {

grpc::Status ServeDumpJob(DiagnosticsService& diagnostics, const v1::DumpJobRequest& request,
                          v1::DumpJobResponse* response) {
  absl::StatusOr<v1::DumpJobResponse> dump = diagnostics.Dump(request.job_id());
  if (dump.ok()) *response = *std::move(dump);
  return ToGrpcStatus(dump.status());
}

grpc::Status ServeJobLogs(DiagnosticsService& diagnostics, grpc::ServerContext* ctx,
                          const v1::GetJobLogsRequest& request,
                          grpc::ServerWriter<v1::JobLogLines>* writer,
                          absl::FunctionRef<grpc::Status()> allowed) {
  DiagnosticsService::LogCursor cursor;
  return ServeStream<v1::JobLogLines>(
      ctx, writer,
      [&](absl::Time deadline) { return diagnostics.NextLogs(request, &cursor, deadline); },
      [](const v1::JobLogLines& m) { return m.end(); }, allowed);
}

}  // namespace coordinator
}  // namespace lockstep

#include "client/cli/diagnose_commands.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/connection.h"
#include "client/cli/status_command.h"
#include "client/job_format.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace cli {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(30);

// A stub on the coordinator's channel; on failure prints why and returns null.
std::unique_ptr<v1::Coordinator::Stub> Connect(const CommandArgs& args, const CommandContext& ctx,
                                               const std::string& command, std::string* address) {
  absl::StatusOr<Connection> connection = ResolveConnection(args);
  if (!connection.ok()) {
    *ctx.err << "lockstep " << command << ": " << connection.status().message() << "\n";
    return nullptr;
  }
  WarnIfInsecure(*connection, ctx);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CoordinatorChannel(connection->address, connection->tls);
  if (!channel.ok()) {
    *ctx.err << "lockstep " << command << ": " << channel.status().message() << "\n";
    return nullptr;
  }
  *address = connection->address;
  return v1::Coordinator::NewStub(*channel);
}

// The single positional argument JOB, or "" after printing usage.
std::string JobId(const CommandArgs& args, const CommandContext& ctx, const std::string& command) {
  if (args.positional().size() == 1) return args.positional()[0];
  *ctx.err << "lockstep " << command << ": expected one JOB id (see `lockstep jobs`)\n";
  return "";
}

int Failed(const CommandContext& ctx, const std::string& command, const grpc::Status& s,
           const std::string& address) {
  *ctx.err << "lockstep " << command << ": "
           << FromGrpcStatus(s, absl::StrCat(command, " at ", address)).message() << "\n";
  return kExitFailure;
}

int RunDump(const CommandArgs& args, const CommandContext& ctx) {
  const std::string id = JobId(args, ctx, "dump");
  if (id.empty()) return kExitUsage;
  std::string address;
  std::unique_ptr<v1::Coordinator::Stub> stub = Connect(args, ctx, "dump", &address);
  if (stub == nullptr) return kExitUsage;
  grpc::ClientContext call;
  call.set_deadline(absl::ToChronoTime(absl::Now() + kRpcTimeout));
  v1::DumpJobRequest request;
  request.set_job_id(id);
  v1::DumpJobResponse response;
  grpc::Status s = stub->DumpJob(&call, request, &response);
  if (!s.ok()) return Failed(ctx, "dump", s, address);
  absl::StatusOr<std::string> json = client::ToJson(response);
  if (!json.ok()) {
    *ctx.err << "lockstep dump: " << json.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << *json << "\n";
  return kExitOk;
}

int RunLogs(const CommandArgs& args, const CommandContext& ctx) {
  const std::string id = JobId(args, ctx, "logs");
  if (id.empty()) return kExitUsage;
  v1::GetJobLogsRequest request;
  request.set_job_id(id);
  request.set_follow(args.Has("follow"));
  if (args.Has("worker")) {
    absl::StatusOr<int> worker = args.GetInt("worker", -1);
    if (!worker.ok() || *worker < 0) {
      *ctx.err << "lockstep logs: --worker: expected a worker index such as 1\n";
      return kExitUsage;
    }
    request.mutable_task()->set_type("worker");
    request.mutable_task()->set_index(*worker);
  }
  std::string address;
  std::unique_ptr<v1::Coordinator::Stub> stub = Connect(args, ctx, "logs", &address);
  if (stub == nullptr) return kExitUsage;
  grpc::ClientContext call;
  // Following lasts as long as the job; the coordinator ends the stream then.
  if (!request.follow()) call.set_deadline(absl::ToChronoTime(absl::Now() + kRpcTimeout));
  std::unique_ptr<grpc::ClientReader<v1::JobLogLines>> reader = stub->GetJobLogs(&call, request);
  v1::JobLogLines message;
  while (reader->Read(&message)) {
    const std::string who =
        absl::StrCat(message.task().type(), "/", message.task().index(),
                     message.attempt() > 1 ? absl::StrCat(" attempt ", message.attempt()) : "");
    for (const v1::LogLine& line : message.lines()) {
      *ctx.out << "[" << who << "] "
               << absl::FormatTime("%H:%M:%E3S", absl::FromUnixMicros(line.unix_micros()),
                                   absl::LocalTimeZone())
               << " " << line.text() << "\n";
    }
    ctx.out->flush();
    if (message.end()) break;
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Failed(ctx, "logs", s, address);
  return kExitOk;
}

}  // namespace

Command DumpCommand() {
  Command c;
  c.name = "dump";
  c.usage = "dump JOB [--coordinator=HOST:PORT]";
  c.summary =
      "Prints every rank's flight recorder (last collectives, phase, step times) and the hang "
      "verdict as JSON.";
  c.options = ConnectionOptions();
  c.run = RunDump;
  return c;
}

Command LogsCommand() {
  Command c;
  c.name = "logs";
  c.usage = "logs JOB [--worker N] [--follow] [--coordinator=HOST:PORT]";
  c.summary = "Prints the workers' log lines of a job; --follow streams them until it ends.";
  c.options = ConnectionOptions();
  c.options.push_back({"worker", "Only worker/N's lines."});
  c.options.push_back({"follow", "Stream new lines until the job ends.", /*takes_value=*/false});
  c.run = RunLogs;
  return c;
}

void AddDiagnoseCommands(std::vector<Command>* commands) {
  commands->push_back(DumpCommand());
  commands->push_back(LogsCommand());
}

}  // namespace cli
}  // namespace lockstep

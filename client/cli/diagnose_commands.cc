#include "client/cli/diagnose_commands.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/connection.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "client/terminal_text.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace cli {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(30);

int RunDump(const CommandArgs& args, const CommandContext& ctx) {
  const std::string id = OneJobId(args, ctx, "dump");
  if (id.empty()) return kExitUsage;
  std::unique_ptr<client::JobServiceClient> coordinator = Connect(args, ctx, "dump", kRpcTimeout);
  if (coordinator == nullptr) return kExitUsage;
  absl::StatusOr<v1::DumpJobResponse> dump = coordinator->DumpJob(id);
  if (!dump.ok()) return FailRpc(ctx, "dump", dump.status());
  absl::StatusOr<std::string> json = client::ToJson(*dump);
  if (!json.ok()) return FailRpc(ctx, "dump", json.status());
  *ctx.out << *json << "\n";
  return kExitOk;
}

int RunLogs(const CommandArgs& args, const CommandContext& ctx) {
  const std::string id = OneJobId(args, ctx, "logs");
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
  std::unique_ptr<client::JobServiceClient> coordinator = Connect(args, ctx, "logs", kRpcTimeout);
  if (coordinator == nullptr) return kExitUsage;
  absl::Status s = coordinator->GetJobLogs(request, [&](const v1::JobLogLines& message) {
    const std::string who =
        absl::StrCat(message.task().type(), "/", message.task().index(),
                     message.attempt() > 1 ? absl::StrCat(" attempt ", message.attempt()) : "");
    for (const v1::LogLine& line : message.lines()) {
      *ctx.out << "[" << who << "] "
               << absl::FormatTime("%H:%M:%E3S", absl::FromUnixMicros(line.unix_micros()),
                                   absl::LocalTimeZone())
               << " " << client::EscapeForTerminal(line.text()) << "\n";
    }
    ctx.out->flush();
  });
  if (!s.ok()) return FailRpc(ctx, "logs", s);
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

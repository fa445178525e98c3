#include "client/cli/status_command.h"

#include "client/cli/connection.h"
#include "client/status_format.h"

namespace lockstep {
namespace cli {
namespace {

int RunStatus(const CommandArgs& args, const CommandContext& ctx) {
  const std::string output = args.Get("output", "table");
  if (output != "table" && output != "json") {
    *ctx.err << "lockstep status: --output: expected table or json, got \"" << output << "\"\n";
    return kExitUsage;
  }
  // 3 s per call: an unreachable coordinator is reported well within 5 s.
  std::unique_ptr<client::JobServiceClient> client = Connect(args, ctx, "status", absl::Seconds(3));
  if (client == nullptr) return kExitUsage;
  absl::StatusOr<v1::GetClusterStatusResponse> status = client->GetClusterStatus();
  if (!status.ok()) {
    *ctx.err << "lockstep status: cannot get the cluster status from the coordinator at "
             << client->address() << ": " << status.status().message()
             << "\nIs lockstep-coordinator running there? Pass --coordinator=HOST:PORT or set "
                "LOCKSTEP_COORDINATOR.\n";
    return kExitFailure;
  }
  if (output == "json") {
    absl::StatusOr<std::string> json = client::FormatStatusJson(*status);
    if (!json.ok()) {
      *ctx.err << "lockstep status: " << json.status().message() << "\n";
      return kExitFailure;
    }
    *ctx.out << *json << "\n";
  } else {
    *ctx.out << client::FormatStatusTable(*status);
  }
  return kExitOk;
}

}  // namespace

Command StatusCommand() {
  Command c;
  c.name = "status";
  c.usage = "status [--coordinator=HOST:PORT] [--tls_ca=CA --token=TOKEN] [--output=table|json]";
  c.summary = "Shows every task: address, state (ALIVE/LOST), incarnation, heartbeat, devices.";
  c.options = ConnectionOptions();
  c.options.push_back({"output", "table (default) or json (the proto's JSON mapping)."});
  c.run = RunStatus;
  return c;
}

}  // namespace cli
}  // namespace lockstep

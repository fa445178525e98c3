#include "client/cli/status_command.h"

#include <cstdlib>

#include "client/status_format.h"
#include "worker/grpc_coordinator_client.h"

namespace lockstep {
namespace cli {
namespace {

int RunStatus(const CommandArgs& args, const CommandContext& ctx) {
  const std::string output = args.Get("output", "table");
  if (output != "table" && output != "json") {
    *ctx.err << "lockstep status: --output: expected table or json, got \"" << output << "\"\n";
    return kExitUsage;
  }
  const std::string address = CoordinatorAddress(args);
  // 3 s per call: an unreachable coordinator is reported well within 5 s.
  auto client = worker::GrpcCoordinatorClient::Create(address, absl::Seconds(3));
  if (!client.ok()) {
    *ctx.err << "lockstep status: " << client.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::GetClusterStatusResponse> status = (*client)->GetClusterStatus();
  if (!status.ok()) {
    *ctx.err << "lockstep status: cannot get the cluster status from the coordinator at " << address
             << ": " << status.status().message()
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

std::string CoordinatorAddress(const CommandArgs& args) {
  if (args.Has("coordinator")) return args.Get("coordinator");
  const char* env = std::getenv("LOCKSTEP_COORDINATOR");
  if (env != nullptr && *env != '\0') return env;
  return "127.0.0.1:7000";
}

Command StatusCommand() {
  Command c;
  c.name = "status";
  c.usage = "status [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary = "Shows every task: address, state (ALIVE/LOST), incarnation, heartbeat, devices.";
  c.options = {
      {"coordinator",
       "Coordinator host:port (default $LOCKSTEP_COORDINATOR, else 127.0.0.1:7000)."},
      {"output", "table (default) or json (the proto's JSON mapping)."},
  };
  c.run = RunStatus;
  return c;
}

}  // namespace cli
}  // namespace lockstep

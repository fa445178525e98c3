#include "client/cli/status_command.h"

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
  absl::StatusOr<Connection> connection = ResolveConnection(args);
  if (!connection.ok()) {
    *ctx.err << "lockstep status: " << connection.status().message() << "\n";
    return kExitUsage;
  }
  WarnIfInsecure(*connection, ctx);
  const std::string& address = connection->address;
  // 3 s per call: an unreachable coordinator is reported well within 5 s.
  auto client = worker::GrpcCoordinatorClient::Create(address, connection->tls, absl::Seconds(3));
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

void WarnIfInsecure(const Connection& connection, const CommandContext& ctx) {
  if (!connection.tls.insecure) return;
  *ctx.err << "warning: --insecure: plaintext to " << connection.address
           << ", no authentication (the coordinator must run --insecure too)\n";
}

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

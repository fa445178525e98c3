// Where and how a `lockstep` command reaches the coordinator: its address and the channel's
// security (the cluster CA, the client's bearer token, optionally a client certificate, or
// --insecure), resolved here and nowhere else; Connect() turns them into the one
// client::JobServiceClient every command uses. Each setting comes from, in order: the
// command's flags, the environment, the config file. The config file is kubectl-style, `key: value`
// lines (`#` comments):
//   coordinator: coord.example.com:7000
//   ca: /etc/lockstep/ca.crt
//   token: 0f3c...
//   cert: /home/me/.config/lockstep/me.crt   (optional, with key:)
//   key: /home/me/.config/lockstep/me.key
//   server_name: coord.example.com           (optional)
//   insecure: false
// It is --config, else $LOCKSTEP_CONFIG, else $XDG_CONFIG_HOME/lockstep/config, else
// ~/.config/lockstep/config (a missing default file is no error).
// Thread model: stateless functions.
#ifndef LOCKSTEP_CLIENT_CLI_CONNECTION_H_
#define LOCKSTEP_CLIENT_CLI_CONNECTION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cli/command.h"
#include "client/job_service_client.h"
#include "common/tls_options.h"

namespace lockstep {
namespace cli {

struct Connection {
  std::string address;  // host:port
  TlsOptions tls;
};

// The options of every command that talks to the coordinator: --coordinator, --insecure,
// --tls_ca, --token, --tls_cert, --tls_key, --tls_server_name, --config.
std::vector<OptionSpec> ConnectionOptions();

using EnvLookup = std::function<std::string(const char* name)>;  // "" when unset
std::string RealEnv(const char* name);

// Flags, then LOCKSTEP_COORDINATOR, LOCKSTEP_INSECURE (1 or true), LOCKSTEP_CA,
// LOCKSTEP_TOKEN, LOCKSTEP_CERT, LOCKSTEP_KEY, then the config file. Default address
// 127.0.0.1:7000. INVALID_ARGUMENT naming the config file's line; NOT_FOUND for a config
// file named by --config or $LOCKSTEP_CONFIG that cannot be read; CheckTlsOptions' errors
// (no CA and no --insecure).
absl::StatusOr<Connection> ResolveConnection(const CommandArgs& args,
                                             const EnvLookup& env = RealEnv);

// How every command reaches the coordinator: ResolveConnection(args), a warning on ctx.err
// under --insecure, and a client whose unary calls last at most `rpc_timeout`. On failure
// prints "lockstep <command>: <why>" on ctx.err and returns null (exit kExitUsage).
std::unique_ptr<client::JobServiceClient> Connect(const CommandArgs& args,
                                                  const CommandContext& ctx,
                                                  const std::string& command,
                                                  absl::Duration rpc_timeout = absl::Seconds(10),
                                                  const EnvLookup& env = RealEnv);

// Under --insecure, says on ctx.err that nothing is authenticated.
void WarnIfInsecure(const Connection& connection, const CommandContext& ctx);

// Prints "lockstep <command>: <why>" for a failed call, with a hint when the coordinator is
// unreachable or refused the credentials; returns kExitFailure.
int FailRpc(const CommandContext& ctx, const std::string& command, const absl::Status& s);

// The single positional argument JOB; prints usage and returns "" when missing.
std::string OneJobId(const CommandArgs& args, const CommandContext& ctx,
                     const std::string& command);

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_CONNECTION_H_

#include "client/cli/connection.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/terminal_text.h"
#include "common/status.h"

namespace lockstep {
namespace cli {
namespace {

// A setting: its flag, its environment variable, its config file key.
struct Setting {
  const char* flag;
  const char* env;
  const char* key;
};
constexpr Setting kAddress = {"coordinator", "LOCKSTEP_COORDINATOR", "coordinator"};
constexpr Setting kCa = {"tls_ca", "LOCKSTEP_CA", "ca"};
constexpr Setting kToken = {"token", "LOCKSTEP_TOKEN", "token"};
constexpr Setting kCert = {"tls_cert", "LOCKSTEP_CERT", "cert"};
constexpr Setting kKey = {"tls_key", "LOCKSTEP_KEY", "key"};
constexpr Setting kServerName = {"tls_server_name", "LOCKSTEP_TLS_SERVER_NAME", "server_name"};
constexpr Setting kInsecure = {"insecure", "LOCKSTEP_INSECURE", "insecure"};

using Config = std::map<std::string, std::string>;

absl::StatusOr<Config> ReadConfig(const CommandArgs& args, const EnvLookup& env) {
  std::string path = args.Get("config");
  bool named = !path.empty();
  if (path.empty()) path = env("LOCKSTEP_CONFIG");
  named = named || !path.empty();
  if (path.empty() && !env("XDG_CONFIG_HOME").empty()) {
    path = absl::StrCat(env("XDG_CONFIG_HOME"), "/lockstep/config");
  }
  if (path.empty() && !env("HOME").empty()) {
    path = absl::StrCat(env("HOME"), "/.config/lockstep/config");
  }
  Config config;
  if (path.empty()) return config;
  std::ifstream f(path);
  if (!f) {
    if (!named) return config;
    return absl::NotFoundError(absl::StrCat("config file ", path, ": cannot read it"));
  }
  std::string line;
  int line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#') continue;
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(l, absl::MaxSplits(':', 1));
    const std::string key(absl::StripAsciiWhitespace(kv.first));
    const std::string value(absl::StripAsciiWhitespace(kv.second));
    bool known = false;
    for (const Setting& s : {kAddress, kCa, kToken, kCert, kKey, kServerName, kInsecure}) {
      known = known || key == s.key;
    }
    if (!known || value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file ", path, " line ", line_no, ": expected `key: value` with key one of ",
          "coordinator, ca, token, cert, key, server_name, insecure; got \"", l, "\""));
    }
    config[key] = value;
  }
  return config;
}

std::string Lookup(const Setting& s, const CommandArgs& args, const EnvLookup& env,
                   const Config& config) {
  if (args.Has(s.flag)) {
    const std::string v = args.Get(s.flag);
    return v.empty() ? "true" : v;  // a switch (--insecure) has no value
  }
  if (std::string v = env(s.env); !v.empty()) return v;
  auto it = config.find(s.key);
  return it == config.end() ? "" : it->second;
}

}  // namespace

std::string RealEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::vector<OptionSpec> ConnectionOptions() {
  return {
      {"coordinator",
       "Coordinator host:port (default $LOCKSTEP_COORDINATOR, the config file's coordinator, "
       "else 127.0.0.1:7000)."},
      {"tls_ca", "PEM file of the cluster CA (default $LOCKSTEP_CA, the config file's ca)."},
      {"token",
       "Bearer token from the coordinator's --tokens_file (default $LOCKSTEP_TOKEN, the "
       "config file's token)."},
      {"tls_cert", "Optional client certificate (`lockstep certs issue --client`)."},
      {"tls_key", "The private key of --tls_cert."},
      {"tls_server_name",
       "The name the coordinator's certificate must carry (default: the host dialed)."},
      {"config",
       "Config file (default $LOCKSTEP_CONFIG, else ~/.config/lockstep/config): `key: value` "
       "lines for coordinator, ca, token, cert, key, server_name, insecure."},
      {"insecure", "Plaintext, no token: for a coordinator started with --insecure.",
       /*takes_value=*/false},
  };
}

absl::StatusOr<Connection> ResolveConnection(const CommandArgs& args, const EnvLookup& env) {
  LS_ASSIGN_OR_RETURN(Config config, ReadConfig(args, env));
  Connection c;
  c.address = Lookup(kAddress, args, env, config);
  if (c.address.empty()) c.address = "127.0.0.1:7000";
  const std::string insecure = absl::AsciiStrToLower(Lookup(kInsecure, args, env, config));
  c.tls.insecure = insecure == "true" || insecure == "1" || insecure == "yes";
  c.tls.ca_file = Lookup(kCa, args, env, config);
  c.tls.token = Lookup(kToken, args, env, config);
  c.tls.cert_file = Lookup(kCert, args, env, config);
  c.tls.key_file = Lookup(kKey, args, env, config);
  c.tls.server_name = Lookup(kServerName, args, env, config);
  LS_RETURN_IF_ERROR(CheckTlsOptions(c.tls, /*need_identity=*/false));
  return c;
}

std::unique_ptr<client::JobServiceClient> Connect(const CommandArgs& args,
                                                  const CommandContext& ctx,
                                                  const std::string& command,
                                                  absl::Duration rpc_timeout,
                                                  const EnvLookup& env) {
  absl::StatusOr<Connection> connection = ResolveConnection(args, env);
  if (!connection.ok()) {
    *ctx.err << "lockstep " << command << ": " << connection.status().message() << "\n";
    return nullptr;
  }
  WarnIfInsecure(*connection, ctx);
  absl::StatusOr<std::unique_ptr<client::JobServiceClient>> client =
      client::JobServiceClient::Create(connection->address, connection->tls, rpc_timeout);
  if (!client.ok()) {
    *ctx.err << "lockstep " << command << ": " << client.status().message() << "\n";
    return nullptr;
  }
  return std::move(*client);
}

void WarnIfInsecure(const Connection& connection, const CommandContext& ctx) {
  if (!connection.tls.insecure) return;
  *ctx.err << "warning: --insecure: plaintext to " << connection.address
           << ", no authentication (the coordinator must run --insecure too)\n";
}

int FailRpc(const CommandContext& ctx, const std::string& command, const absl::Status& s) {
  *ctx.err << "lockstep " << command << ": " << client::EscapeForTerminal(s.message()) << "\n";
  if (s.code() == absl::StatusCode::kUnavailable) {
    *ctx.err << "Is lockstep-coordinator running there? Pass --coordinator=HOST:PORT or set "
                "LOCKSTEP_COORDINATOR; with TLS, --tls_ca must be the CA that signed its "
                "certificate.\n";
  } else if (s.code() == absl::StatusCode::kUnauthenticated ||
             s.code() == absl::StatusCode::kPermissionDenied) {
    *ctx.err << "Pass a token from the coordinator's --tokens_file (--token, $LOCKSTEP_TOKEN "
                "or ~/.config/lockstep/config) with the role this command needs.\n";
  }
  return kExitFailure;
}

std::string OneJobId(const CommandArgs& args, const CommandContext& ctx,
                     const std::string& command) {
  if (args.positional().size() != 1) {
    *ctx.err << "lockstep " << command << ": expected one JOB id (see `lockstep jobs`)\n";
    return "";
  }
  return args.positional()[0];
}

}  // namespace cli
}  // namespace lockstep

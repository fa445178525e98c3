#include "client/cli/certs_command.h"

#include "absl/strings/str_split.h"
#include "common/certs.h"

namespace lockstep {
namespace cli {
namespace {

int Fail(const CommandContext& ctx, const absl::Status& s) {
  *ctx.err << "lockstep certs: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

int RunCerts(const CommandArgs& args, const CommandContext& ctx) {
  if (args.positional().size() != 1) {
    *ctx.err << "lockstep certs: expected one of init, issue, token\n";
    return kExitUsage;
  }
  const std::string action = args.positional()[0];
  if (action == "token") {
    *ctx.out << NewBearerToken() << "\n";
    return kExitOk;
  }
  const std::string dir = args.Get("dir");
  if (dir.empty()) {
    *ctx.err << "lockstep certs " << action << ": --dir is needed (where the CA lives)\n";
    return kExitUsage;
  }
  if (action == "init") {
    auto ca = CertificateAuthority::Init(dir);
    if (!ca.ok()) return Fail(ctx, ca.status());
    *ctx.out << "CA written: " << (*ca)->ca_cert_path() << " (keep " << dir
             << "/ca.key secret; give ca.crt to every daemon and client as --tls_ca)\n";
    return kExitOk;
  }
  if (action != "issue") {
    *ctx.err << "lockstep certs: unknown action \"" << action
             << "\"; expected init, issue, token\n";
    return kExitUsage;
  }
  CertRequest request;
  request.name = args.Get("name");
  request.client = args.Has("client");
  request.role = args.Get("role", "operator");
  if (args.Has("san")) request.sans = absl::StrSplit(args.Get("san"), ',', absl::SkipEmpty());
  absl::StatusOr<absl::Duration> days = args.GetDuration("valid_for", absl::Hours(24 * 365));
  if (!days.ok()) return Fail(ctx, days.status());
  request.not_after = absl::Now() + *days;
  auto ca = CertificateAuthority::Open(dir);
  if (!ca.ok()) return Fail(ctx, ca.status());
  if (absl::Status s = (*ca)->Issue(request); !s.ok()) return Fail(ctx, s);
  *ctx.out << (request.client ? "client" : "daemon") << " certificate for " << request.name << ": "
           << CertificateAuthority::CertPath(dir, request.name) << " and "
           << CertificateAuthority::KeyPath(dir, request.name) << "\n";
  return kExitOk;
}

}  // namespace

Command CertsCommand() {
  Command c;
  c.name = "certs";
  c.usage =
      "certs init --dir=DIR | certs issue --dir=DIR --name=NAME [--san=H,IP] [--client "
      "[--role=viewer|operator]] | certs token";
  c.summary =
      "Makes the cluster's TLS material: a CA, certificates for daemons (coordinator, "
      "lockstepd) and clients, and bearer tokens for the coordinator's --tokens_file.";
  c.options = {
      {"dir", "Directory of the CA (ca.key, ca.crt) and of the certificates it issues."},
      {"name",
       "issue: the holder's host or pod name: the certificate's CN (a worker's identity) and "
       "a subject alternative name."},
      {"san",
       "issue: more names or IP addresses the certificate is good for, comma-separated "
       "(localhost,127.0.0.1 for a coordinator reached on loopback)."},
      {"client", "issue: a client certificate (TLS client only) instead of a daemon's.",
       /*takes_value=*/false},
      {"role", "issue --client: viewer or operator (default operator)."},
      {"valid_for", "issue: how long the certificate is valid (default 8760h, a year)."},
  };
  c.run = RunCerts;
  return c;
}

}  // namespace cli
}  // namespace lockstep

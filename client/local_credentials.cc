#include "client/local_credentials.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace lockstep {
namespace client {
namespace {

constexpr char kCoordinatorName[] = "coordinator";

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

}  // namespace

absl::StatusOr<LocalCredentials> LocalCredentials::Create(const std::string& dir) {
  LocalCredentials c;
  c.dir_ = dir;
  if (Exists(CertificateAuthority::KeyPath(dir, "ca"))) {
    LS_ASSIGN_OR_RETURN(c.ca_, CertificateAuthority::Open(dir));
  } else {
    LS_ASSIGN_OR_RETURN(c.ca_, CertificateAuthority::Init(dir, "lockstep local CA"));
  }
  if (!Exists(CertificateAuthority::CertPath(dir, kCoordinatorName))) {
    CertRequest r;
    r.name = kCoordinatorName;
    r.sans = {"localhost", "127.0.0.1", "::1"};
    LS_RETURN_IF_ERROR(c.ca_->Issue(r));
  }
  // The tokens file: reused when there (its first two lines are ours), else written.
  std::ifstream in(c.tokens_file());
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() == 3 && f[1] == "operator" && c.operator_token_.empty()) c.operator_token_ = f[0];
    if (f.size() == 3 && f[1] == "viewer" && c.viewer_token_.empty()) c.viewer_token_ = f[0];
  }
  if (c.operator_token_.empty() || c.viewer_token_.empty()) {
    c.operator_token_ = NewBearerToken();
    c.viewer_token_ = NewBearerToken();
    std::ofstream out(c.tokens_file(), std::ios::trunc);
    out << "# <token> <role> <name>: the clients of this local cluster\n"
        << c.operator_token_ << " operator local-operator\n"
        << c.viewer_token_ << " viewer local-viewer\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", c.tokens_file()));
  }
  return c;
}

absl::StatusOr<TlsOptions> LocalCredentials::Daemon(const std::string& name) const {
  if (!Exists(CertificateAuthority::CertPath(dir_, name))) {
    CertRequest r;
    r.name = name;
    LS_RETURN_IF_ERROR(ca_->Issue(r));
  }
  TlsOptions tls;
  tls.ca_file = ca_file();
  tls.cert_file = CertificateAuthority::CertPath(dir_, name);
  tls.key_file = CertificateAuthority::KeyPath(dir_, name);
  return tls;
}

TlsOptions LocalCredentials::Client(const std::string& token) const {
  TlsOptions tls;
  tls.ca_file = ca_file();
  tls.token = token;
  return tls;
}

std::vector<std::string> LocalCredentials::CoordinatorFlags() const {
  return {absl::StrCat("--tls_ca=", ca_file()),
          absl::StrCat("--tls_cert=", CertificateAuthority::CertPath(dir_, kCoordinatorName)),
          absl::StrCat("--tls_key=", CertificateAuthority::KeyPath(dir_, kCoordinatorName)),
          absl::StrCat("--tokens_file=", tokens_file())};
}

std::vector<std::string> LocalCredentials::Flags(const TlsOptions& tls) {
  if (tls.insecure) return {"--insecure"};
  std::vector<std::string> flags = {absl::StrCat("--tls_ca=", tls.ca_file)};
  if (!tls.cert_file.empty()) {
    flags.push_back(absl::StrCat("--tls_cert=", tls.cert_file));
    flags.push_back(absl::StrCat("--tls_key=", tls.key_file));
  }
  if (!tls.token.empty()) flags.push_back(absl::StrCat("--token=", tls.token));
  return flags;
}

}  // namespace client
}  // namespace lockstep

#include "client/local_credentials.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/secret_file.h"
#include "common/status.h"

namespace lockstep {
namespace client {
namespace {

constexpr char kCoordinatorName[] = "coordinator";

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// A client config file (client/cli/connection.h) with the CA and `token`, mode 0600.
absl::Status WriteClientConfig(const std::string& path, const std::string& ca,
                               const std::string& token) {
  return WritePrivateFile(path, absl::StrCat("# a client of this local cluster: lockstep --config=",
                                             path, "\nca: ", ca, "\ntoken: ", token, "\n"));
}

}  // namespace

absl::StatusOr<LocalCredentials> LocalCredentials::Create(const std::string& dir) {
  LocalCredentials c;
  c.dir_ = dir;
  if (Exists(CertificateAuthority::KeyPath(dir, "ca"))) {
    LS_ASSIGN_OR_RETURN(c.ca_, CertificateAuthority::Open(dir));
  } else {
    LS_ASSIGN_OR_RETURN(c.ca_, CertificateAuthority::Init(dir, "lockstep local CA"));
  }
  // Only this user may list or open the material (work dirs made before this rule too).
  if (chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot chmod 0700 ", dir, ": ", strerror(errno)));
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
    LS_RETURN_IF_ERROR(WritePrivateFile(
        c.tokens_file(),
        absl::StrCat("# <token> <role> <name>: the clients of this local cluster\n",
                     c.operator_token_, " operator local-operator\n", c.viewer_token_,
                     " viewer local-viewer\n")));
  } else if (chmod(c.tokens_file().c_str(), 0600) != 0) {  // one written before this rule
    return absl::InternalError(
        absl::StrCat("cannot chmod 0600 ", c.tokens_file(), ": ", strerror(errno)));
  }
  LS_RETURN_IF_ERROR(WriteClientConfig(c.operator_config(), c.ca_file(), c.operator_token_));
  LS_RETURN_IF_ERROR(WriteClientConfig(c.viewer_config(), c.ca_file(), c.viewer_token_));
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
  return flags;
}

}  // namespace client
}  // namespace lockstep

// LocalCredentials: the throwaway TLS material of a cluster on one machine (`lockstep
// local`, the multi-process tests, the benchmarks), in one directory: a CA (reused when the
// directory already has one, so a coordinator restarted on the same work_dir keeps its
// clients), the coordinator's certificate (good for localhost and 127.0.0.1), a certificate
// per worker issued on first use, a tokens file with an operator and a viewer token, and a
// client config file per token (operator.config, viewer.config: `ca:` and `token:` lines,
// client/cli/connection.h). Every secret in it (keys, tokens, configs) is mode 0600 and the
// directory 0700; a token never goes on a command line, where `ps` shows it to every user:
// a `lockstep` child takes --config=<role>.config (OperatorFlags, ViewerFlags).
//
// Ownership: a value type over files in `dir`. Thread model: one owner thread.
#ifndef LOCKSTEP_CLIENT_LOCAL_CREDENTIALS_H_
#define LOCKSTEP_CLIENT_LOCAL_CREDENTIALS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/certs.h"
#include "common/tls_options.h"

namespace lockstep {
namespace client {

class LocalCredentials {
 public:
  // Makes (or reopens) the material in `dir` (created if missing).
  static absl::StatusOr<LocalCredentials> Create(const std::string& dir);

  // A daemon's TLS options with its own certificate `name` (issued if missing).
  absl::StatusOr<TlsOptions> Daemon(const std::string& name) const;
  // A client's: the CA and the operator (or viewer) token.
  TlsOptions Operator() const { return Client(operator_token_); }
  TlsOptions Viewer() const { return Client(viewer_token_); }

  // lockstep-coordinator's flags: --tls_ca, --tls_cert, --tls_key, --tokens_file.
  std::vector<std::string> CoordinatorFlags() const;
  // The flags a process with `tls` takes (--tls_ca, --tls_cert/--tls_key when it has a
  // certificate; --insecure when insecure): lockstepd's. Never `tls.token`: a client
  // child takes OperatorFlags() or ViewerFlags() instead.
  static std::vector<std::string> Flags(const TlsOptions& tls);
  // The `lockstep` CLI's flags as the operator (or viewer): --config=<dir>/<role>.config,
  // which holds the CA and the token.
  std::vector<std::string> OperatorFlags() const { return {"--config=" + operator_config()}; }
  std::vector<std::string> ViewerFlags() const { return {"--config=" + viewer_config()}; }

  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return CertificateAuthority::CaCertPath(dir_); }
  std::string tokens_file() const { return dir_ + "/tokens"; }
  std::string operator_config() const { return dir_ + "/operator.config"; }
  std::string viewer_config() const { return dir_ + "/viewer.config"; }

 private:
  TlsOptions Client(const std::string& token) const;

  std::string dir_;
  std::shared_ptr<CertificateAuthority> ca_;
  std::string operator_token_;
  std::string viewer_token_;
};

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_LOCAL_CREDENTIALS_H_

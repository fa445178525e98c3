#include "common/tls_options.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/certs.h"
#include "common/secret_file.h"
#include "common/status.h"

namespace lockstep {

absl::Status CheckTlsOptions(const TlsOptions& options, bool need_identity) {
  if (options.insecure) return absl::OkStatus();
  if (options.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_ca: the cluster CA's certificate is needed to speak TLS (make one with "
        "`lockstep certs init`), or pass --insecure for plaintext without authorization");
  }
  if (access(options.ca_file.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("--tls_ca: cannot read ", options.ca_file));
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: pass both");
  }
  if (options.cert_file.empty()) {
    if (!need_identity) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "--tls_cert/--tls_key: a daemon needs its certificate from the cluster CA (`lockstep "
        "certs issue --dir=DIR --name=HOST`), or pass --insecure");
  }
  // The private key first: a key others can read is refused before it is used at all.
  LS_RETURN_IF_ERROR(CheckSecretFile(options.key_file, "--tls_key"));
  absl::Status s = CheckCertificate(options.ca_file, options.cert_file, options.key_file);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("--tls_cert: ", s.message()));
  return absl::OkStatus();
}

}  // namespace lockstep

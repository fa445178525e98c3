// TlsOptions: how a Lockstep process secures its gRPC connections (the coordinator's port,
// lockstepd's and the CLI's channel to it), as its flags give them: --insecure, --tls_ca,
// --tls_cert, --tls_key, and a client's --token. common/grpc_channel.h and
// coordinator/grpc_server.h turn it into gRPC credentials; files are re-read every
// `reload_interval`, so certificates are rotated without a restart.
// Thread model: a value type.
#ifndef LOCKSTEP_COMMON_TLS_OPTIONS_H_
#define LOCKSTEP_COMMON_TLS_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockstep {

struct TlsOptions {
  // Plaintext, and no authorization on the coordinator. Only with an explicit --insecure.
  bool insecure = false;
  std::string ca_file;    // PEM: the cluster CA, which verifies the peer
  std::string cert_file;  // PEM: this process's certificate (daemons; a client may have one)
  std::string key_file;   // PEM: its private key
  // Clients: a bearer token, sent as `authorization: Bearer <token>` on every call.
  std::string token;
  // The name the coordinator's certificate must carry; empty: the host dialed.
  std::string server_name;
  // How often the files are checked for new certificates (rotation without restart).
  absl::Duration reload_interval = absl::Seconds(10);
};

// Checks what `options` names before any connection is tried, so that a typo fails at start
// with a message naming the flag: the CA must be given; `need_identity`: the certificate
// and key too; given ones must verify against the CA (common/certs.h CheckCertificate), and
// the key must be private (common/secret_file.h CheckSecretFile: PERMISSION_DENIED naming
// the file and `chmod 600` when its group or every user may read it).
// OK with nothing checked when insecure.
absl::Status CheckTlsOptions(const TlsOptions& options, bool need_identity);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_TLS_OPTIONS_H_

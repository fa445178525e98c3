// The one place a Lockstep process turns its TlsOptions into gRPC credentials: the
// coordinator's server port (coordinator/grpc_server.cc) and every channel to it (lockstepd's
// agent, the `lockstep` CLI, through common/grpc_channel.h). The server's credentials are
// built only from options that pass CheckTlsOptions (the CA, the certificate against it, the
// private key's mode: a key others can read is refused with PERMISSION_DENIED naming
// --tls_key). A channel's callers check first (lockstepd's main with need_identity, the CLI's
// ResolveConnection without), because tests build deliberately wrong clients (no
// certificate, another CA) to see the server refuse them. Certificate files are watched
// (re-read every `reload_interval`), so rotated certificates are used without a restart.
// Thread model: stateless functions.
#ifndef LOCKSTEP_COMMON_TLS_CREDENTIALS_H_
#define LOCKSTEP_COMMON_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "absl/status/statusor.h"
#include "common/tls_options.h"

namespace lockstep {

// A server's credentials: plaintext when `tls.insecure`; else TLS with the server's own
// certificate, asking every caller for a certificate and verifying one presented against the
// cluster CA (daemons must present one, clients may come with a token instead: the
// coordinator's authorizer decides). Errors: CheckTlsOptions' (need_identity: true).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsOptions& tls);

// A channel's credentials: plaintext when `tls.insecure`; else TLS verifying the server's
// certificate against the cluster CA and its name against the host dialed (the caller sets
// `tls.server_name` as the target name override), presenting `tls.cert_file` when given and
// the bearer token when `tls.token` is set. Checks nothing (see above).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsOptions& tls);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_TLS_CREDENTIALS_H_

#include "common/tls_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>

#include "absl/time/time.h"
#include "common/status.h"

namespace lockstep {
namespace {

std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> WatchFiles(
    const TlsOptions& tls) {
  const unsigned int reload_s = std::max<int64_t>(1, absl::ToInt64Seconds(tls.reload_interval));
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.ca_file, reload_s);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsOptions& tls) {
  LS_RETURN_IF_ERROR(CheckTlsOptions(tls, /*need_identity=*/true));
  if (tls.insecure) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(WatchFiles(tls));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsOptions& tls) {
  if (tls.insecure) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(WatchFiles(tls));
  options.watch_root_certs();
  if (!tls.cert_file.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(
      std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::experimental::TlsCredentials(options);
  if (!tls.token.empty()) {
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(tls.token));
  }
  return creds;
}

}  // namespace lockstep

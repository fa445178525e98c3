#include "common/grpc_channel.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/time/time.h"
#include "common/net.h"
#include "common/status.h"

namespace lockstep {
namespace {

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsOptions& tls) {
  if (tls.insecure) return grpc::InsecureChannelCredentials();
  const unsigned int reload_s = std::max<int64_t>(1, absl::ToInt64Seconds(tls.reload_interval));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.ca_file, reload_s);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
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

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CoordinatorChannel(const std::string& address,
                                                                  const TlsOptions& tls) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return Annotate(hp.status(), "coordinator address");
  grpc::ChannelArguments args;
  // Reconnect quickly after the coordinator restarts (gRPC's default backoff reaches 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // gRPC also takes this as the least time one connection attempt (TCP, the TLS handshake,
  // HTTP/2 SETTINGS) may take before it is abandoned. At 100 ms, a TLS handshake on a busy
  // 2-core machine was cut off again and again, and workers could not register for 20 s.
  // A refused connection (the coordinator down) still fails at once; calls keep their own
  // deadlines.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // Callers decide about retries; gRPC's own retry filter would only add per-call buffering.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  if (!tls.insecure && !tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(address, ChannelCredentials(tls), args);
}

}  // namespace lockstep

#include "coordinator/grpc_authorizer.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <memory>
#include <utility>

#include "common/certs.h"
#include "common/grpc_status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

void GrpcAuthorizer::SetTokens(TokenTable tokens) {
  absl::MutexLock l(&mu_);
  tokens_ = std::move(tokens);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void GrpcAuthorizer::SetRevoked(RevokedCertificates revoked) {
  absl::MutexLock l(&mu_);
  revoked_ = std::move(revoked);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

grpc::Status GrpcAuthorizer::Reauthorize(grpc::ServerContext* ctx, Service service,
                                         const char* method, uint64_t* generation) const {
  const uint64_t now = this->generation();
  if (insecure_ || *generation == now) return grpc::Status::OK;
  grpc::Status s = Authorize(ctx, service, method);
  if (s.ok()) {
    *generation = now;
  } else {
    spdlog::warn("open {} stream of {} ended: its credentials are no longer accepted", method,
                 ctx->peer());
  }
  return s;
}

std::optional<Principal> GrpcAuthorizer::Caller(grpc::ServerContext* ctx) const {
  // A certificate, when the peer presented one, was verified against the cluster CA in the
  // handshake (GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY).
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    // The subject's fields, read from the certificate itself (common/certs.h), never from
    // a text rendering of the subject.
    for (const grpc::string_ref& pem : auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME)) {
      absl::StatusOr<CertificateSubject> subject =
          ReadCertificateSubject(absl::string_view(pem.data(), pem.size()));
      if (!subject.ok()) {
        spdlog::warn("certificate of {} not accepted: {}", ctx->peer(),
                     std::string(subject.status().message()));
        continue;
      }
      std::optional<Principal> p = PrincipalFromCertificate(subject->common_name, subject->unit);
      if (!p.has_value()) continue;
      absl::ReaderMutexLock l(&mu_);
      if (revoked_.contains(p->name)) {
        spdlog::warn(
            "certificate of {} ({}) not accepted: the name is revoked "
            "(--revoked_certificates_file)",
            ctx->peer(), p->ToString());
        return std::nullopt;  // not even with a token: this connection is the revoked holder's
      }
      return p;
    }
  }
  const auto& metadata = ctx->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  absl::ReaderMutexLock l(&mu_);
  return tokens_.FindBearer(absl::string_view(it->second.data(), it->second.size()));
}

grpc::Status GrpcAuthorizer::Authorize(grpc::ServerContext* ctx, Service service,
                                       const char* method, std::string* identity) const {
  if (insecure_) return grpc::Status::OK;
  std::optional<Principal> caller = Caller(ctx);
  absl::Status s = coordinator::Authorize(service, method, caller);
  if (!s.ok()) {
    spdlog::warn("{} from {} refused: {}", method, ctx->peer(), std::string(s.message()));
    return ToGrpcStatus(s);
  }
  if (identity != nullptr) *identity = caller->name;
  return grpc::Status::OK;
}

}  // namespace coordinator
}  // namespace lockstep

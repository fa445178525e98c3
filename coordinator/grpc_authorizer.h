// GrpcAuthorizer: who is calling a coordinator RPC, and may they. Shared by the two service
// adapters (grpc_worker_service.h, grpc_job_service.h), so that both find the caller the
// same way: a verified certificate from the cluster CA, its subject read with OpenSSL
// (common/certs.h ReadCertificateSubject), names a daemon (a worker) or a client
// (coordinator/authz.h PrincipalFromCertificate), else the `authorization: Bearer`
// token names a client from the TokenTable. A certificate whose name is revoked
// (RevokedCertificates) names no one: its calls are UNAUTHENTICATED. The rules themselves are
// authz.cc's tables, one per service. With `insecure` every call is allowed.
//
// Open streams are authorized again when the tokens or the revoked certificates change
// (Reauthorize, called by ServeStream between messages): a token removed by SetTokens, or a
// certificate name added by SetRevoked (both on SIGHUP), ends its streams with
// UNAUTHENTICATED within a poll interval (grpc_stream_writer.h), not only its next call.
//
// Ownership: owns the TokenTable. Thread model: thread-safe; SetTokens may run while calls
// are authorized (a call sees the old or the new table, never a mix).
#ifndef LOCKSTEP_COORDINATOR_GRPC_AUTHORIZER_H_
#define LOCKSTEP_COORDINATOR_GRPC_AUTHORIZER_H_

#include <grpcpp/server_context.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/authz.h"
#include "coordinator/revoked_certificates.h"
#include "coordinator/token_table.h"

namespace lockstep {
namespace coordinator {

class GrpcAuthorizer {
 public:
  GrpcAuthorizer(bool insecure, TokenTable tokens, RevokedCertificates revoked = {})
      : insecure_(insecure), tokens_(std::move(tokens)), revoked_(std::move(revoked)) {}

  // Replaces the clients' tokens (the coordinator reloads --tokens_file on SIGHUP): calls
  // authorized after it returns use `tokens`.
  void SetTokens(TokenTable tokens);
  // Replaces the revoked certificate names: calls authorized after it returns, and open
  // streams at their next check, use `revoked`.
  void SetRevoked(RevokedCertificates revoked);

  // OK when the caller may call `method` of `service` (always under --insecure); sets
  // `*identity` to the caller's name ("" under --insecure). UNAUTHENTICATED /
  // PERMISSION_DENIED otherwise, logged with the peer's address. Handlers pass __func__:
  // their names are the proto's method names, which authz.cc's tables are keyed by.
  grpc::Status Authorize(grpc::ServerContext* ctx, Service service, const char* method,
                         std::string* identity = nullptr) const;

  // For an open stream of `method`: OK while its caller may still call it. `*generation` is
  // the stream's copy of generation() (0 before its first check); while the tokens have not
  // changed since, the answer is OK at once, else the caller is authorized afresh.
  grpc::Status Reauthorize(grpc::ServerContext* ctx, Service service, const char* method,
                           uint64_t* generation) const;
  // Bumped by every SetTokens and SetRevoked.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  bool insecure() const { return insecure_; }

 private:
  // The verified certificate's principal, else the bearer token's; nullopt when neither
  // is known.
  std::optional<Principal> Caller(grpc::ServerContext* ctx) const;

  const bool insecure_;
  std::atomic<uint64_t> generation_{1};
  mutable absl::Mutex mu_;
  TokenTable tokens_ ABSL_GUARDED_BY(mu_);
  RevokedCertificates revoked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_AUTHORIZER_H_

// RevokedCertificates: the certificate names (CNs) the coordinator refuses although the
// cluster CA signed them (--revoked_certificates_file): a stolen worker certificate, a
// departed operator's client certificate. One name per line; blank lines and lines starting
// with '#' are skipped. Revocation is by name, as identities are: every certificate naming a
// revoked identity is refused (UNAUTHENTICATED) from the next call on, and its open streams
// end within a poll interval (GrpcAuthorizer::Reauthorize); a host that gets a fresh
// certificate comes back under a new name (and `lockstep release` frees the old name's
// tasks). SIGHUP reloads the file with the tokens.
//
// Ownership: a value type. Thread model: immutable after Parse/Load, so safe to share.
#ifndef LOCKSTEP_COORDINATOR_REVOKED_CERTIFICATES_H_
#define LOCKSTEP_COORDINATOR_REVOKED_CERTIFICATES_H_

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {
namespace coordinator {

class RevokedCertificates {
 public:
  RevokedCertificates() = default;

  // INVALID_ARGUMENT naming `source` and the line: a name that is not a certificate name
  // (common/certs.h IsValidCertificateName) or a line with more than one field.
  static absl::StatusOr<RevokedCertificates> Parse(absl::string_view text,
                                                   absl::string_view source);
  // NOT_FOUND when the file cannot be read; Parse's errors.
  static absl::StatusOr<RevokedCertificates> Load(const std::string& path);

  bool contains(absl::string_view name) const { return names_.contains(name); }
  size_t size() const { return names_.size(); }

 private:
  absl::flat_hash_set<std::string> names_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_REVOKED_CERTIFICATES_H_

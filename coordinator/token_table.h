// TokenTable: the clients' bearer tokens the coordinator accepts (--tokens_file). One token
// per line: `<token> <role> <name>`, role viewer or operator; blank lines and lines starting
// with '#' are skipped. A client sends its token as gRPC metadata
// `authorization: Bearer <token>`; Find() tells who it is.
//
// Ownership: a value type. Thread model: immutable after Parse/Load, so safe to share.
#ifndef LOCKSTEP_COORDINATOR_TOKEN_TABLE_H_
#define LOCKSTEP_COORDINATOR_TOKEN_TABLE_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/authz.h"

namespace lockstep {
namespace coordinator {

class TokenTable {
 public:
  TokenTable() = default;

  // INVALID_ARGUMENT naming `source` and the line: a line without three fields, an unknown
  // role, a token shorter than 16 characters, a token listed twice.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);
  // NOT_FOUND when the file cannot be read; PERMISSION_DENIED when others may read it
  // (common/secret_file.h CheckSecretFile: the message names the file and `chmod 600`);
  // Parse's errors. The coordinator loads it at start and on every SIGHUP.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The principal of an `authorization` header value ("Bearer <token>"); nullopt when it is
  // not a bearer token or the token is unknown.
  std::optional<Principal> FindBearer(absl::string_view header) const;
  size_t size() const { return principals_.size(); }

 private:
  absl::flat_hash_map<std::string, Principal> principals_;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_TOKEN_TABLE_H_

// Authorization of the coordinator's RPCs: who may call what. Pure logic, no gRPC; the gRPC
// adapter (grpc_service.cc) finds the caller's Principal and asks Authorize() at the top of
// every handler.
//
// One table (authz.cc) maps each Coordinator method to the principals allowed to call it:
//   worker    a daemon: a certificate from the cluster CA with OU=daemon, known by its
//             CN (host or pod name). Only workers reach the worker RPCs (membership,
//             heartbeats, assignments, the key-value store and barriers).
//   viewer    a client (bearer token, or a client certificate with OU=viewer): status and
//             the read-only job RPCs.
//   operator  a client with OU=operator or an operator token: a viewer's RPCs plus
//             SubmitJob and CancelJob.
// Workers never act as clients and clients never reach worker RPCs. A method missing from
// the table is refused to everyone.
//
// Thread model: stateless functions.
#ifndef LOCKSTEP_COORDINATOR_AUTHZ_H_
#define LOCKSTEP_COORDINATOR_AUTHZ_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {
namespace coordinator {

enum class Role { kWorker, kViewer, kOperator };

// "worker", "viewer", "operator".
absl::string_view RoleName(Role role);
// A client role by name ("viewer", "operator"); nullopt for anything else (workers are
// known by certificate only, never by name).
std::optional<Role> ClientRole(absl::string_view name);

// An authenticated caller.
struct Principal {
  Role role;
  std::string name;  // a worker's certificate CN, a token's or a client certificate's name
  std::string ToString() const;  // "worker worker-0", "viewer alice"
};

// The principal a verified certificate from the cluster CA stands for: `subject` is the
// subject as gRPC reports it ("CN=worker-0,OU=daemon,O=lockstep"); OU=daemon is a worker,
// OU=viewer / OU=operator a client of that role; nullopt for any other (no OU, an unknown
// one, or no CN).
std::optional<Principal> PrincipalFromCertificate(absl::string_view subject);

// OK when `caller` may call `method` (the proto's method name, "Heartbeat").
// UNAUTHENTICATED when `caller` is nullopt (no credentials, or unknown ones);
// PERMISSION_DENIED when the caller's role may not call it, or the method is not in the table.
absl::Status Authorize(absl::string_view method, const std::optional<Principal>& caller);

// The methods in the table (tests check it covers the whole service).
std::vector<absl::string_view> AuthorizedMethods();

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_AUTHZ_H_

// Authorization of the coordinator's RPCs: who may call what. Pure logic, no gRPC; the gRPC
// adapters (grpc_worker_service.cc, grpc_job_service.cc) find the caller's Principal
// (grpc_authorizer.h) and ask Authorize() at the top of every handler.
//
// The coordinator serves two services (proto/lockstep/v1/coordinator.proto), and authz.cc
// holds one table per service: the roles the service admits at all, then each method and
// the roles allowed to call it (a row can only narrow the service's roles, never widen them):
//   WorkerService  workers only: a daemon, a certificate from the cluster CA with
//                  OU=daemon, known by its CN (host or pod name). Membership, heartbeats,
//                  assignments, the key-value store and barriers.
//   JobService     clients only:
//     viewer       a bearer token, or a client certificate with OU=viewer: status and the
//                  read-only job RPCs.
//     operator     a client with OU=operator or an operator token: a viewer's RPCs plus
//                  SubmitJob, CancelJob, DrainWorker and ReleaseTask.
// Workers never act as clients and clients never reach worker RPCs. A method missing from
// its service's table is refused to everyone.
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

// The principal a verified certificate from the cluster CA stands for, from its subject's
// fields as common/certs.h ReadCertificateSubject read them (one CN, at most one OU):
// OU=daemon is a worker, OU=viewer / OU=operator a client of that role; nullopt for any
// other (no OU, an unknown one, or no CN).
std::optional<Principal> PrincipalFromCertificate(absl::string_view common_name,
                                                  absl::string_view unit);

// The coordinator's gRPC services, each with its own table.
enum class Service { kWorker, kJob };

// The proto's full service name: "lockstep.v1.WorkerService", "lockstep.v1.JobService".
absl::string_view ServiceName(Service service);

// OK when `caller` may call `method` (the proto's method name, "Heartbeat") of `service`.
// UNAUTHENTICATED when `caller` is nullopt (no credentials, or unknown ones);
// PERMISSION_DENIED when the service does not admit the caller's role, when the method's
// row does not, or when the method is not in the service's table.
absl::Status Authorize(Service service, absl::string_view method,
                       const std::optional<Principal>& caller);

// The methods in `service`'s table (tests check it covers the whole proto service).
std::vector<absl::string_view> AuthorizedMethods(Service service);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_AUTHZ_H_

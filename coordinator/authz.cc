#include "coordinator/authz.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace lockstep {
namespace coordinator {
namespace {

constexpr unsigned Bit(Role r) { return 1u << static_cast<unsigned>(r); }
constexpr unsigned kWorkers = Bit(Role::kWorker);
constexpr unsigned kViewers = Bit(Role::kViewer) | Bit(Role::kOperator);
constexpr unsigned kOperators = Bit(Role::kOperator);

struct Rule {
  absl::string_view method;
  unsigned allowed;  // Bit(role) | ...
};

// A service's table: the roles it admits at all, and every RPC with who may call it.
struct ServiceTable {
  absl::string_view name;  // the proto's full service name
  unsigned admitted;       // Bit(role) | ...; bounds every row
  absl::Span<const Rule> rules;
};

// One row per line, so that adding an RPC is adding a line.
// clang-format off
// lockstep.v1.WorkerService: daemons only, known by their certificate.
constexpr Rule kWorkerServiceRules[] = {
    {"RegisterWorker", kWorkers},
    {"Heartbeat", kWorkers},
    {"Deregister", kWorkers},
    {"WatchAssignments", kWorkers},
    {"SetKey", kWorkers},
    {"GetKey", kWorkers},
    {"Barrier", kWorkers},
    {"UploadCheckpoint", kWorkers},
};

// lockstep.v1.JobService: clients only; read-only for viewers, changes for operators.
constexpr Rule kJobServiceRules[] = {
    {"GetClusterStatus", kViewers},
    {"ListJobs", kViewers},
    {"GetJob", kViewers},
    {"WatchJob", kViewers},
    {"DumpJob", kViewers},
    {"GetJobLogs", kViewers},
    {"FetchCheckpoint", kViewers},
    {"SubmitJob", kOperators},
    {"CancelJob", kOperators},
    {"DrainWorker", kOperators},
    {"ReleaseTask", kOperators},
};
// clang-format on

constexpr ServiceTable kWorkerService = {"lockstep.v1.WorkerService", kWorkers,
                                         kWorkerServiceRules};
constexpr ServiceTable kJobService = {"lockstep.v1.JobService", kViewers, kJobServiceRules};

const ServiceTable& TableOf(Service service) {
  return service == Service::kWorker ? kWorkerService : kJobService;
}

std::string AllowedNames(unsigned allowed) {
  std::string out;
  for (Role r : {Role::kWorker, Role::kViewer, Role::kOperator}) {
    if ((allowed & Bit(r)) == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : " or ", RoleName(r));
  }
  return out;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kWorker:
      return "worker";
    case Role::kViewer:
      return "viewer";
    case Role::kOperator:
      return "operator";
  }
  return "?";
}

std::optional<Role> ClientRole(absl::string_view name) {
  if (name == "viewer") return Role::kViewer;
  if (name == "operator") return Role::kOperator;
  return std::nullopt;
}

std::string Principal::ToString() const { return absl::StrCat(RoleName(role), " ", name); }

std::optional<Principal> PrincipalFromCertificate(absl::string_view common_name,
                                                  absl::string_view unit) {
  if (common_name.empty()) return std::nullopt;
  if (unit == "daemon") return Principal{Role::kWorker, std::string(common_name)};
  if (std::optional<Role> role = ClientRole(unit)) {
    return Principal{*role, std::string(common_name)};
  }
  return std::nullopt;
}

absl::string_view ServiceName(Service service) { return TableOf(service).name; }

absl::Status Authorize(Service service, absl::string_view method,
                       const std::optional<Principal>& caller) {
  if (!caller.has_value()) {
    return absl::UnauthenticatedError(absl::StrCat(
        method,
        ": no known credentials: a client needs a bearer token from the coordinator's "
        "--tokens_file (lockstep --token, $LOCKSTEP_TOKEN or ~/.config/lockstep/config), a "
        "worker a certificate from the cluster CA (lockstepd --tls_cert/--tls_key)"));
  }
  const ServiceTable& table = TableOf(service);
  if ((table.admitted & Bit(caller->role)) == 0) {
    return absl::PermissionDeniedError(absl::StrCat(method, ": ", table.name, " is for ",
                                                    AllowedNames(table.admitted),
                                                    " only; the caller is ", caller->ToString()));
  }
  for (const Rule& rule : table.rules) {
    if (rule.method != method) continue;
    const unsigned allowed = rule.allowed & table.admitted;
    if ((allowed & Bit(caller->role)) != 0) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(method, " is for ", AllowedNames(allowed),
                                                    " only; the caller is ", caller->ToString()));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      method, ": not in ", table.name, "'s authorization table; refused to ", caller->ToString()));
}

std::vector<absl::string_view> AuthorizedMethods(Service service) {
  std::vector<absl::string_view> out;
  for (const Rule& rule : TableOf(service).rules) out.push_back(rule.method);
  return out;
}

}  // namespace coordinator
}  // namespace lockstep

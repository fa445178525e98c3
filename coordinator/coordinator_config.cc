#include "coordinator/coordinator_config.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace coordinator {
namespace {

std::string DefaultStateDir(const CoordinatorEnvironment& environment) {
  const std::string xdg = environment.env("XDG_STATE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return absl::StrCat(xdg, "/lockstep");
  const std::string home = environment.env("HOME");
  if (!home.empty() && home[0] == '/') return absl::StrCat(home, "/.local/state/lockstep");
  return absl::StrCat("/tmp/lockstep-state-", environment.uid);
}

}  // namespace

CoordinatorEnvironment CoordinatorEnvironment::Real() {
  CoordinatorEnvironment e;
  e.env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  e.uid = getuid();
  return e;
}

absl::Status ResolveCoordinatorConfig(const DaemonFlags& daemon,
                                      const CoordinatorEnvironment& environment,
                                      CoordinatorServerOptions* options) {
  options->host = daemon.host.empty() ? "0.0.0.0" : daemon.host;
  options->state_dir = daemon.state_dir.empty() ? DefaultStateDir(environment) : daemon.state_dir;
  options->tls = daemon.tls;
  const MembershipOptions& m = options->membership;
  if (m.max_task_index < 1 || m.max_tasks_per_identity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_task_index (", m.max_task_index, ") and --max_tasks_per_identity (",
                     m.max_tasks_per_identity, ") must be at least 1"));
  }
  if (m.heartbeat_interval <= absl::ZeroDuration() || m.heartbeat_timeout <= m.heartbeat_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat_timeout (", absl::FormatDuration(m.heartbeat_timeout),
                     ") must be longer than --heartbeat_interval (",
                     absl::FormatDuration(m.heartbeat_interval), ")"));
  }
  return absl::OkStatus();
}

}  // namespace coordinator
}  // namespace lockstep

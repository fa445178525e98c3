// ResolveCoordinatorConfig: lockstep-coordinator's startup configuration, its flags turned
// into CoordinatorServerOptions with the defaults and rules applied once, in a function
// without side effects (the environment comes in as a lookup) and with a unit test per rule
// (coordinator_config_test.cc). coordinator/main.cc parses the flags, calls it, and wires
// the rest: the state directory made, the tokens and revoked names loaded, monitoring, the
// server.
//   host       --host, else 0.0.0.0 (every interface).
//   state_dir  --state_dir, else $XDG_STATE_HOME/lockstep, else $HOME/.local/state/lockstep,
//              else /tmp/lockstep-state-<uid> (relative $XDG_STATE_HOME / $HOME ignored).
//   rules      --max_task_index and --max_tasks_per_identity at least 1; --heartbeat_timeout
//              longer than a positive --heartbeat_interval. INVALID_ARGUMENT naming the flags.
// Thread model: a pure function.
#ifndef LOCKSTEP_COORDINATOR_COORDINATOR_CONFIG_H_
#define LOCKSTEP_COORDINATOR_COORDINATOR_CONFIG_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/daemon_flags.h"
#include "coordinator/grpc_server.h"

namespace lockstep {
namespace coordinator {

struct CoordinatorEnvironment {
  std::function<std::string(const char* name)> env;  // "" when unset
  uid_t uid = 0;

  // The process's environment and user.
  static CoordinatorEnvironment Real();
};

// Fills `options`' host, state_dir and tls from `daemon` with their defaults, and checks the
// rules above on `options` (whose port, limits and heartbeats main set from the other flags).
absl::Status ResolveCoordinatorConfig(const DaemonFlags& daemon,
                                      const CoordinatorEnvironment& environment,
                                      CoordinatorServerOptions* options);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_COORDINATOR_CONFIG_H_

// The command-line flags both daemons define, lockstep-coordinator and lockstepd, defined
// here once with one help text each: the TLS files (--tls_ca, --tls_cert, --tls_key),
// --insecure, --state_dir, --host, --log_level, --metrics_address and --health_address.
// Their names are an interface (deploy/'s systemd units and Kubernetes manifests and the
// multi-process tests pass them) and do not change. Each daemon's main.cc reads them once
// with ReadDaemonFlags() into a DaemonFlags value and resolves its own defaults from it
// (coordinator/coordinator_config.h, worker/worker_config.h); no other code reads a flag.
// Only the daemons' binaries link this library (Bazel visibility), so no program defines
// these flags twice.
// Thread model: ReadDaemonFlags() after absl::ParseCommandLine, from main's thread.
#ifndef LOCKSTEP_COMMON_DAEMON_FLAGS_H_
#define LOCKSTEP_COMMON_DAEMON_FLAGS_H_

#include <string>

#include "common/tls_options.h"

namespace lockstep {

struct DaemonFlags {
  // --host: the coordinator's listening address, or the host lockstepd reports with its
  // reserved data-plane port; "" when not given (each daemon has its own default).
  std::string host;
  std::string state_dir;        // --state_dir; "": the daemon's default
  std::string log_level;        // --log_level: debug, info, warn or error
  std::string metrics_address;  // --metrics_address; "": no metrics
  std::string health_address;   // --health_address; "": no health port
  // --insecure, --tls_ca, --tls_cert, --tls_key (server_name and token left empty).
  TlsOptions tls;
};

DaemonFlags ReadDaemonFlags();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_DAEMON_FLAGS_H_

#include "bench/bench_cluster.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, coordinator_bin, "",
          "Default: <bazel-bin>/coordinator/lockstep-coordinator.");
ABSL_FLAG(std::string, lockstepd_bin, "", "Default: <bazel-bin>/worker/lockstepd.");
ABSL_FLAG(bool, insecure, false,
          "Plaintext gRPC for every process (default: TLS, mutual between the daemons, and an "
          "operator token for this client, as `lockstep local` runs).");

namespace lockstep {
namespace bench {

client::LocalClusterOptions BenchClusterOptions(int workers) {
  client::LocalClusterOptions o;
  o.coordinator_bin = absl::GetFlag(FLAGS_coordinator_bin);
  o.lockstepd_bin = absl::GetFlag(FLAGS_lockstepd_bin);
  o.workers = workers;
  o.insecure = absl::GetFlag(FLAGS_insecure);
  return o;
}

std::unique_ptr<client::LocalCluster> StartBenchCoordinator(const client::LocalClusterOptions& o) {
  absl::StatusOr<std::unique_ptr<client::LocalCluster>> cluster =
      client::LocalCluster::StartCoordinator(o);
  if (!cluster.ok()) {
    fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return nullptr;
  }
  return *std::move(cluster);
}

}  // namespace bench
}  // namespace lockstep

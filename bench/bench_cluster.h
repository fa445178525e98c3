// The flags and the start of the local cluster every control-plane benchmark runs
// (cluster_formation, status_latency, chaos): a real lockstep-coordinator and lockstepd
// processes, started as `lockstep local` starts them (client/local_cluster.h).
//   --coordinator_bin  default <bazel-bin>/coordinator/lockstep-coordinator
//   --lockstepd_bin    default <bazel-bin>/worker/lockstepd
//   --insecure         plaintext gRPC for every process (default: TLS, mutual between the
//                      daemons, and an operator token for the benchmark's client)
// Thread model: main's thread, after absl::ParseCommandLine.
#ifndef LOCKSTEP_BENCH_BENCH_CLUSTER_H_
#define LOCKSTEP_BENCH_BENCH_CLUSTER_H_

#include <memory>

#include "client/local_cluster.h"

namespace lockstep {
namespace bench {

// LocalClusterOptions from the flags above, for `workers` lockstepd.
client::LocalClusterOptions BenchClusterOptions(int workers);

// The coordinator started (no worker yet); on failure prints why on stderr and returns null.
std::unique_ptr<client::LocalCluster> StartBenchCoordinator(const client::LocalClusterOptions& o);

}  // namespace bench
}  // namespace lockstep

#endif  // LOCKSTEP_BENCH_BENCH_CLUSTER_H_

// Runs the peer all-reduce programs of bench/peers (Gloo, Open MPI) for
// `lockstep bench allreduce` and reads their JSON lines (one per size).
//
// Peers live at <bazel-bin>/bench/peers/{gloo_allreduce,mpi_allreduce}; <bazel-bin> is two
// directories above the running executable (bench/allreduce or client/lockstep), unless
// --peers_dir says otherwise. Thread model: free functions; RunPeer blocks.
#ifndef LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_PEERS_H_
#define LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_PEERS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {
namespace bench {

struct PeerSpec {
  std::string impl;     // "mpi_vader", "gloo_ring_chunked", ...
  std::string program;  // "mpi_allreduce" or "gloo_allreduce"
  std::vector<std::string> args;
};

struct PeerRow {
  double time_us_p50 = 0;
  double busbw_gbps = 0;
  bool correct = false;
};

// The peers to compare with for a transport ("tcp" or "shm"), filtered by `which`
// ("all", "none", "mpi", "gloo").
std::vector<PeerSpec> PeersFor(const std::string& transport, const std::string& which);

// <bazel-bin>/bench/peers, from /proc/self/exe.
std::string DefaultPeersDir();

// Runs `dir/program args...`, bounded by `timeout`; returns rows by message size.
// NOT_FOUND when the program is missing, UNAVAILABLE when it fails (with its stderr tail).
absl::StatusOr<std::map<uint64_t, PeerRow>> RunPeer(const std::string& dir, const PeerSpec& peer,
                                                    absl::Duration timeout);

}  // namespace bench
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_PEERS_H_

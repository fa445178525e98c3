// The size sweep shared by the Gloo and Open MPI peer benchmarks. Each benchmark adapts
// its library to PeerCollective; RunPeerSweep then applies the rules of
// peer_measurement.h identically to both, so their figures compare.
//
// Thread model: one PeerCollective per rank process, used from one thread.
#ifndef LOCKSTEP_BENCH_PEERS_PEER_SWEEP_H_
#define LOCKSTEP_BENCH_PEERS_PEER_SWEEP_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::bench {

// One rank's view of a peer library. Every method is collective: all ranks call it in the
// same order. Errors (a dead peer, a timeout) come back as a non-OK status naming the rank.
class PeerCollective {
 public:
  virtual ~PeerCollective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Binds the float32 SUM all-reduce to data[0, count), in place; AllReduce runs it.
  // Libraries that build per-buffer state (Gloo) do it here, outside the timed loop.
  virtual absl::Status Prepare(float* data, uint64_t count) = 0;
  virtual absl::Status AllReduce() = 0;
  virtual absl::Status Barrier() = 0;
  // Returns rank 0's `value` on every rank.
  virtual absl::StatusOr<int> BroadcastFromRank0(int value) = 0;
  // Returns the sum of `value` over all ranks, on every rank.
  virtual absl::StatusOr<int> SumOverRanks(int value) = 0;
  // After the last collective: returns once every rank has called it, so that no rank closes
  // its connections while another is still finishing a collective (default: nothing to do).
  virtual absl::Status Leave() { return absl::OkStatus(); }
};

struct PeerSweepOptions {
  std::string impl;             // The "impl" of the JSON lines.
  std::vector<uint64_t> sizes;  // Bytes, from ParseSizeRange.
  int max_iters = 1000;         // --iters: at most this many timed iterations per size.
  int min_iters = 5;            // At least this many (unless max_iters is smaller).
  int warmup_iters = 5;         // Untimed calls before timing (see WarmupIters).
  double target_s = 0.25;       // Aim for this much timed work per size.
};

// Builds options from the benchmarks' flags: parses `sizes_text` (ParseSizeRange) and
// checks the counts. Fails with INVALID_ARGUMENT naming the bad flag.
absl::StatusOr<PeerSweepOptions> MakePeerSweepOptions(std::string impl,
                                                      const std::string& sizes_text, int max_iters,
                                                      int min_iters, int warmup_iters,
                                                      double target_s);

// Runs the sweep; rank 0 writes one JSON line per size to `out` (flushed per line) and
// logs wrong results to stderr. Returns the number of sizes whose result was wrong.
absl::StatusOr<int> RunPeerSweep(PeerCollective& collective, const PeerSweepOptions& options,
                                 std::FILE* out);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_PEERS_PEER_SWEEP_H_

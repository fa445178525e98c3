// The knobs of the collective algorithms (AlgorithmOptions) and the one table of the sizes
// chosen from measurements per transport and world size (kTuning in tuning.cc; the
// measurements behind each row are in bench/allreduce_tuning.md, taken with bench/allreduce).
//
// An all-reduce of S bytes runs
//   - recursive doubling below `doubling_threshold_bytes`: log2(n) exchanges of the whole
//     vector, the fewest round trips (one for n = 2), for latency-bound tiny messages;
//   - recursive halving-doubling (Rabenseifner; non-powers of two fold the extra ranks into
//     their neighbours first) below `ring_threshold_bytes`: 2 log2(n) steps;
//   - ring (reduce-scatter + all-gather, each step split into `chunk_bytes` messages and
//     reduced as bytes arrive) above: 2(n-1)/n * S bytes per rank, bandwidth-optimal;
// and with `segment_bytes` > 0, a larger vector runs as consecutive all-reduces of segments
// of that size, each choosing by its own size. ChooseAllReduce makes that choice and
// ResolveAlgorithmOptions fills the sizes from the table; nothing else chooses.
//
// Thread model: plain values and pure functions.
#ifndef LOCKSTEP_COLLECTIVES_ALGORITHMS_TUNING_H_
#define LOCKSTEP_COLLECTIVES_ALGORITHMS_TUNING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "collectives/types.h"

namespace lockstep {
namespace collectives {

// A size in AlgorithmOptions left at this takes the table's value for the transport and
// world size (ResolveAlgorithmOptions); any other value is the caller's and is kept, also one
// that equals the table's.
constexpr size_t kTransportChoice = ~size_t{0};

struct AlgorithmOptions {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  size_t chunk_bytes = kTransportChoice;  // ring and chain message size
  size_t ring_threshold_bytes = kTransportChoice;
  size_t doubling_threshold_bytes = kTransportChoice;
  size_t broadcast_chain_threshold_bytes = kTransportChoice;
  // > 0: with kAuto, all-reduces larger than this run as consecutive all-reduces of
  // segments of this size (each choosing its algorithm by its own size). 0: one piece.
  size_t segment_bytes = kTransportChoice;
  // > 0: the communicator's thread asks the kernel for scheduler slices this short
  // (common/sched.h), so that a wake-up from a peer preempts the compute threads it shares
  // its cores with instead of waiting out their slice. Zero keeps the kernel's default.
  absl::Duration progress_thread_slice = absl::ZeroDuration();
  // The ring all-reduce's order: ring_order[i] is the rank at position i, each rank once;
  // empty: rank order. Ranks that share a core or a cache should be neighbours, so that
  // most ring steps stay inside it (CreateCommunicator orders ranks pinned to one CPU each
  // by that CPU; RingOrderForCpus; measured in bench/allreduce_tuning.md). Every rank must
  // be given the same order.
  std::vector<int> ring_order;
};

// Which groups a row of the table is for.
enum class GroupShape : uint8_t {
  kAny,
  kPair,                // two ranks
  kMoreThanTwo,         // three ranks or more
  kPowerOfTwoAboveTwo,  // 4, 8, 16, ... ranks (halving-doubling needs no fold)
};

// One row of the table: the sizes for `transport` (kAuto: every transport) and groups of
// `shape`.
struct TuningRow {
  TransportKind transport;
  GroupShape shape;
  size_t doubling_threshold_bytes;
  size_t ring_threshold_bytes;
  size_t segment_bytes;  // 0: never cut
};

// The same for every transport and group.
constexpr size_t kChunkBytes = 4 << 20;
constexpr size_t kBroadcastChainThresholdBytes = 256 << 10;

// The table's first row that matches `transport` and `world_size` (its last row matches
// every group).
const TuningRow& TuningFor(TransportKind transport, int world_size);

// `options` with every kTransportChoice size replaced by the table's value for `transport`
// and `world_size`; kAuto and kInProc get the generic row. CreateCommunicator resolves for
// the transport it made, and Communicator::Create resolves what is left, so the algorithms
// see no kTransportChoice.
AlgorithmOptions ResolveAlgorithmOptions(AlgorithmOptions options, TransportKind transport,
                                         int world_size);

// The all-reduce algorithm for `bytes` under resolved `options` (whose thresholds already
// depend on the world size, ResolveAlgorithmOptions).
AllReduceAlgorithm ChooseAllReduce(const AlgorithmOptions& options, size_t bytes);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_ALGORITHMS_TUNING_H_

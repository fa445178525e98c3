#include "collectives/algorithms/tuning.h"

#include <iterator>

namespace lockstep {
namespace collectives {
namespace {

constexpr size_t KiB = 1 << 10;
constexpr size_t MiB = 1 << 20;

// First matching row wins. Why each value: bench/allreduce_tuning.md.
constexpr TuningRow kTuning[] = {
    // transport            group shape                     doubling  ring      segment
    {TransportKind::kShm, GroupShape::kPowerOfTwoAboveTwo, 8 * KiB, 8 * MiB, 0},
    {TransportKind::kShm, GroupShape::kAny, 8 * KiB, 64 * KiB, 0},
    {TransportKind::kTcp, GroupShape::kPair, 1 * MiB, 1 * MiB, 0},
    {TransportKind::kTcp, GroupShape::kMoreThanTwo, 32 * KiB, 2 * MiB, 1 * MiB},
    {TransportKind::kAuto, GroupShape::kAny, 32 * KiB, 1 * MiB, 0},
};

bool Matches(GroupShape shape, int n) {
  switch (shape) {
    case GroupShape::kPair:
      return n == 2;
    case GroupShape::kMoreThanTwo:
      return n > 2;
    case GroupShape::kPowerOfTwoAboveTwo:
      return n > 2 && (n & (n - 1)) == 0;
    default:
      return true;
  }
}

}  // namespace

const TuningRow& TuningFor(TransportKind transport, int world_size) {
  for (const TuningRow& row : kTuning) {
    if ((row.transport == TransportKind::kAuto || row.transport == transport) &&
        Matches(row.shape, world_size)) {
      return row;
    }
  }
  return kTuning[std::size(kTuning) - 1];
}

AlgorithmOptions ResolveAlgorithmOptions(AlgorithmOptions options, TransportKind transport,
                                         int world_size) {
  const TuningRow& row = TuningFor(transport, world_size);
  auto choose = [](size_t* field, size_t measured) {
    if (*field == kTransportChoice) *field = measured;
  };
  choose(&options.chunk_bytes, kChunkBytes);
  choose(&options.ring_threshold_bytes, row.ring_threshold_bytes);
  choose(&options.doubling_threshold_bytes, row.doubling_threshold_bytes);
  choose(&options.broadcast_chain_threshold_bytes, kBroadcastChainThresholdBytes);
  choose(&options.segment_bytes, row.segment_bytes);
  return options;
}

AllReduceAlgorithm ChooseAllReduce(const AlgorithmOptions& options, size_t bytes) {
  if (options.algorithm != AllReduceAlgorithm::kAuto) return options.algorithm;
  if (bytes < options.doubling_threshold_bytes) return AllReduceAlgorithm::kRecursiveDoubling;
  return bytes < options.ring_threshold_bytes ? AllReduceAlgorithm::kHalvingDoubling
                                              : AllReduceAlgorithm::kRing;
}

}  // namespace collectives
}  // namespace lockstep

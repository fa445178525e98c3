#include "collectives/algorithms/tuning.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr size_t KiB = 1 << 10;
constexpr size_t MiB = 1 << 20;

TEST(ResolveAlgorithmOptionsTest, UnsetSizesTakeTheTablesRowForTransportAndWorldSize) {
  const AlgorithmOptions unset;
  AlgorithmOptions tcp2 = ResolveAlgorithmOptions(unset, TransportKind::kTcp, 2);
  EXPECT_EQ(tcp2.chunk_bytes, kChunkBytes);
  EXPECT_EQ(tcp2.doubling_threshold_bytes, 1 * MiB);
  EXPECT_EQ(tcp2.ring_threshold_bytes, 1 * MiB);
  EXPECT_EQ(tcp2.segment_bytes, 0u);

  AlgorithmOptions tcp4 = ResolveAlgorithmOptions(unset, TransportKind::kTcp, 4);
  EXPECT_EQ(tcp4.chunk_bytes, kChunkBytes);
  EXPECT_EQ(tcp4.doubling_threshold_bytes, 32 * KiB);
  EXPECT_EQ(tcp4.ring_threshold_bytes, 2 * MiB);
  EXPECT_EQ(tcp4.segment_bytes, 1 * MiB);
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kTcp, 3).segment_bytes, 1 * MiB);

  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 4).ring_threshold_bytes, 8 * MiB);
  // Not a power of two: halving-doubling would fold a rank's whole vector first.
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 3).ring_threshold_bytes, 64 * KiB);
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 2).ring_threshold_bytes, 64 * KiB);
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 8).doubling_threshold_bytes,
            8 * KiB);

  for (TransportKind generic_kind : {TransportKind::kAuto, TransportKind::kInProc}) {
    AlgorithmOptions generic = ResolveAlgorithmOptions(unset, generic_kind, 4);
    EXPECT_EQ(generic.chunk_bytes, kChunkBytes);
    EXPECT_EQ(generic.ring_threshold_bytes, 1 * MiB);
    EXPECT_EQ(generic.doubling_threshold_bytes, 32 * KiB);
    EXPECT_EQ(generic.broadcast_chain_threshold_bytes, kBroadcastChainThresholdBytes);
    EXPECT_EQ(generic.segment_bytes, 0u);
  }
  // A single TCP rank is neither a pair nor more: the generic row.
  EXPECT_EQ(&TuningFor(TransportKind::kTcp, 1), &TuningFor(TransportKind::kAuto, 1));
}

TEST(ResolveAlgorithmOptionsTest, KeepsWhatTheCallerSetEvenWhenItEqualsTheTables) {
  AlgorithmOptions chosen;
  chosen.ring_threshold_bytes = 1 * MiB;  // TCP n=4 would take 2
  chosen.doubling_threshold_bytes = 32 * KiB;
  chosen.chunk_bytes = kChunkBytes;
  chosen.segment_bytes = 0;  // no segments, where TCP n=4 would cut 1 MiB
  for (TransportKind kind : {TransportKind::kTcp, TransportKind::kShm, TransportKind::kInProc}) {
    for (int n : {2, 3, 4, 8}) {
      AlgorithmOptions r = ResolveAlgorithmOptions(chosen, kind, n);
      EXPECT_EQ(r.ring_threshold_bytes, 1 * MiB) << TransportKindName(kind) << n;
      EXPECT_EQ(r.doubling_threshold_bytes, 32 * KiB);
      EXPECT_EQ(r.chunk_bytes, kChunkBytes);
      EXPECT_EQ(r.segment_bytes, 0u);
    }
  }
}

TEST(ChooseAllReduceTest, BySizeUnderTheResolvedThresholds) {
  const AlgorithmOptions tcp4 = ResolveAlgorithmOptions({}, TransportKind::kTcp, 4);
  EXPECT_EQ(ChooseAllReduce(tcp4, 8), AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAllReduce(tcp4, 64 * KiB), AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(ChooseAllReduce(tcp4, 2 * MiB), AllReduceAlgorithm::kRing);
  AlgorithmOptions forced = tcp4;
  forced.algorithm = AllReduceAlgorithm::kRing;
  EXPECT_EQ(ChooseAllReduce(forced, 8), AllReduceAlgorithm::kRing);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

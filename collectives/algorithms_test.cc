#include "collectives/algorithms.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(ResolveAlgorithmOptionsTest, UnsetSizesTakeTheTransportsMeasuredValues) {
  const AlgorithmOptions unset;
  AlgorithmOptions tcp2 = ResolveAlgorithmOptions(unset, TransportKind::kTcp, 2);
  EXPECT_EQ(tcp2.chunk_bytes, kDefaultChunkBytes);
  EXPECT_EQ(tcp2.doubling_threshold_bytes, kTcpPairDoublingThresholdBytes);
  EXPECT_EQ(tcp2.ring_threshold_bytes, kDefaultRingThresholdBytes);
  EXPECT_EQ(tcp2.segment_bytes, 0u);

  AlgorithmOptions tcp4 = ResolveAlgorithmOptions(unset, TransportKind::kTcp, 4);
  EXPECT_EQ(tcp4.chunk_bytes, kDefaultChunkBytes);
  EXPECT_EQ(tcp4.doubling_threshold_bytes, kDefaultDoublingThresholdBytes);
  EXPECT_EQ(tcp4.ring_threshold_bytes, kTcpRingThresholdBytes);
  EXPECT_EQ(tcp4.segment_bytes, kTcpSegmentBytes);

  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 4).ring_threshold_bytes,
            kShmManyRanksRingThresholdBytes);
  // Not a power of two: halving-doubling would fold a rank's whole vector first.
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 3).ring_threshold_bytes,
            kShmRingThresholdBytes);
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 2).ring_threshold_bytes,
            kShmRingThresholdBytes);
  EXPECT_EQ(ResolveAlgorithmOptions(unset, TransportKind::kShm, 8).doubling_threshold_bytes,
            kShmDoublingThresholdBytes);

  AlgorithmOptions generic = ResolveAlgorithmOptions(unset, TransportKind::kAuto, 4);
  EXPECT_EQ(generic.chunk_bytes, kDefaultChunkBytes);
  EXPECT_EQ(generic.ring_threshold_bytes, kDefaultRingThresholdBytes);
  EXPECT_EQ(generic.doubling_threshold_bytes, kDefaultDoublingThresholdBytes);
  EXPECT_EQ(generic.broadcast_chain_threshold_bytes, kDefaultBroadcastChainThresholdBytes);
  EXPECT_EQ(generic.segment_bytes, 0u);
}

TEST(ResolveAlgorithmOptionsTest, KeepsWhatTheCallerSetEvenWhenItEqualsADefault) {
  AlgorithmOptions chosen;
  chosen.ring_threshold_bytes = kDefaultRingThresholdBytes;  // 1 MiB; TCP n=4 would take 2
  chosen.doubling_threshold_bytes = kDefaultDoublingThresholdBytes;
  chosen.chunk_bytes = kDefaultChunkBytes;  // a TCP pair would take 256 KiB
  chosen.segment_bytes = 0;                 // no segments, where TCP n=4 would cut 1 MiB
  for (TransportKind kind : {TransportKind::kTcp, TransportKind::kShm, TransportKind::kInProc}) {
    for (int n : {2, 3, 4, 8}) {
      AlgorithmOptions r = ResolveAlgorithmOptions(chosen, kind, n);
      EXPECT_EQ(r.ring_threshold_bytes, kDefaultRingThresholdBytes) << TransportKindName(kind) << n;
      EXPECT_EQ(r.doubling_threshold_bytes, kDefaultDoublingThresholdBytes);
      EXPECT_EQ(r.chunk_bytes, kDefaultChunkBytes);
      EXPECT_EQ(r.segment_bytes, 0u);
    }
  }
}

TEST(ChooseAllReduceTest, BySizeUnderTheResolvedThresholds) {
  const AlgorithmOptions tcp4 = ResolveAlgorithmOptions({}, TransportKind::kTcp, 4);
  EXPECT_EQ(ChooseAllReduce(tcp4, 4, 8), AllReduceAlgorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAllReduce(tcp4, 4, 64 << 10), AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(ChooseAllReduce(tcp4, 4, kTcpRingThresholdBytes), AllReduceAlgorithm::kRing);
  AlgorithmOptions forced = tcp4;
  forced.algorithm = AllReduceAlgorithm::kRing;
  EXPECT_EQ(ChooseAllReduce(forced, 4, 8), AllReduceAlgorithm::kRing);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

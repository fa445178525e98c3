#include "engine/kernels/gpu/grid_emulator.h"

#include <set>
#include <vector>

#include "engine/kernels/gpu/block_reduce.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {
namespace {

using ::testing::HasSubstr;
using A = EmulatedAccess;

// A grid-stride loop with a bug: it strides by the block, not the grid, so with several
// blocks every element past the first block is written by several of them.
struct BlockStrideFill {
  A::Out<float> y;
  int64_t n;
  void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += t.block_dim) y.Store(i, 1.f);
  }
};

struct FillAllButLast {
  A::Out<float> y;
  int64_t n;
  void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n - 1; i += Stride(t)) y.Store(i, 1.f);
  }
};

struct FillOnePast {
  A::Out<float> y;
  int64_t n;
  void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i <= n; i += Stride(t)) y.Store(i, 1.f);
  }
};

struct Fill {
  A::Out<float> y;
  int64_t n;
  void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, float(i));
  }
};

TEST(GridEmulatorTest, ACorrectGridStrideLoopPasses) {
  std::vector<float> y(1000, 0.f);
  GridEmulator emu("Fill", 1);
  ASSERT_TRUE(emu.Run(LaunchShape{3, 64}, Fill{emu.Out<float>(y.data(), 1000, "y"), 1000}).ok());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(y[i], float(i));
}

TEST(GridEmulatorTest, AnElementWrittenTwiceIsAnError) {
  std::vector<float> y(1000);
  GridEmulator emu("BlockStrideFill", 1);
  absl::Status s =
      emu.Run(LaunchShape{3, 64}, BlockStrideFill{emu.Out<float>(y.data(), 1000, "y"), 1000});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("emulated kernel BlockStrideFill (grid 3 x 64)"));
  EXPECT_THAT(s.message(), HasSubstr("not written exactly once (element 64 2 times"));
}

TEST(GridEmulatorTest, AnElementNeverWrittenIsAnError) {
  std::vector<float> y(100);
  GridEmulator emu("FillAllButLast", 1);
  absl::Status s =
      emu.Run(LaunchShape{2, 32}, FillAllButLast{emu.Out<float>(y.data(), 100, "y"), 100});
  EXPECT_THAT(s.message(),
              HasSubstr("y: 1 of 100 elements not written exactly once (element 99 0 times)"));
}

TEST(GridEmulatorTest, AStoreOutOfBoundsIsAnErrorAndLeavesMemoryAlone) {
  std::vector<float> y(101, -1.f);
  GridEmulator emu("FillOnePast", 1);
  absl::Status s =
      emu.Run(LaunchShape{2, 32}, FillOnePast{emu.Out<float>(y.data(), 100, "y"), 100});
  EXPECT_THAT(s.message(), HasSubstr("y: store to element 100 of 100"));
  EXPECT_EQ(y[100], -1.f);
}

// Blocks run in an order drawn from the seed (every block once); so do a block's threads.
struct RecordOrder {
  std::vector<int64_t>* blocks;
  A::Out<float> y;
  void operator()(const ThreadIndex& t) const {
    if (t.thread == 0) blocks->push_back(t.block);
    y.Store(FirstIndex(t), 0.f);
  }
};

TEST(GridEmulatorTest, BlocksRunInAShuffledOrder) {
  std::set<std::vector<int64_t>> orders;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::vector<int64_t> blocks;
    std::vector<float> y(16 * 32);
    GridEmulator emu("RecordOrder", seed);
    ASSERT_TRUE(
        emu.Run(LaunchShape{16, 32}, RecordOrder{&blocks, emu.Out<float>(y.data(), 512, "y")})
            .ok());
    EXPECT_EQ(std::set<int64_t>(blocks.begin(), blocks.end()).size(), 16u);
    orders.insert(blocks);
  }
  EXPECT_GT(orders.size(), 1u) << "every seed ran the blocks in the same order";
}

// Every thread gets the block's sum and max; the values are exact small integers, and the
// locals before the barriers survive them (fibers keep each thread's stack).
struct SumAndMax {
  A::In<float> x;
  A::Out<float> sums;
  A::Out<float> maxes;
  template <class Block>
  void operator()(const ThreadIndex& t, Block& block) const {
    const float mine = x.Load(FirstIndex(t));
    const float sum = BlockSum(t, block, mine);
    const float max = BlockMax(t, block, mine);
    sums.Store(FirstIndex(t), sum + 0.f * mine);
    maxes.Store(FirstIndex(t), max);
  }
};

TEST(GridEmulatorTest, BlockReductionsGiveEveryThreadTheResult) {
  constexpr int kBlocks = 3, kThreads = 96;
  std::vector<float> x(kBlocks * kThreads), sums(x.size()), maxes(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 101);
  GridEmulator emu("SumAndMax", 7);
  ASSERT_TRUE(emu.RunBlocks(LaunchShape{kBlocks, kThreads},
                            SumAndMax{emu.In<float>(x.data(), x.size(), "x"),
                                      emu.Out<float>(sums.data(), x.size(), "sums"),
                                      emu.Out<float>(maxes.data(), x.size(), "maxes")})
                  .ok());
  for (int b = 0; b < kBlocks; ++b) {
    float sum = 0, max = -1;
    for (int t = 0; t < kThreads; ++t) {
      sum += x[b * kThreads + t];
      max = std::max(max, x[b * kThreads + t]);
    }
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(sums[b * kThreads + t], sum) << "block " << b << " thread " << t;
      ASSERT_EQ(maxes[b * kThreads + t], max) << "block " << b << " thread " << t;
    }
  }
}

// The warp sum is __shfl_xor_sync's butterfly: with values whose sum depends on the order,
// lane 0's result is ((v0 + v16) + (v8 + v24)) + ... exactly.
struct WarpSumOnly {
  A::In<float> x;
  A::Out<float> y;
  template <class Block>
  void operator()(const ThreadIndex& t, Block& block) const {
    y.Store(t.thread, block.WarpSum(x.Load(t.thread)));
  }
};

TEST(GridEmulatorTest, WarpSumIsTheXorButterfly) {
  std::vector<float> x(32), y(32);
  for (int i = 0; i < 32; ++i) x[i] = 1.f + float(i) * 1e-7f * float(i % 5);
  std::vector<float> lanes = x;
  for (int offset = 16; offset > 0; offset /= 2) {
    std::vector<float> next(32);
    for (int l = 0; l < 32; ++l) next[l] = lanes[l] + lanes[l ^ offset];
    lanes = next;
  }
  GridEmulator emu("WarpSumOnly", 3);
  ASSERT_TRUE(emu.RunBlocks(LaunchShape{1, 32}, WarpSumOnly{emu.In<float>(x.data(), 32, "x"),
                                                            emu.Out<float>(y.data(), 32, "y")})
                  .ok());
  EXPECT_EQ(y, lanes);
}

// Thread 0 returns before the barrier the others wait at: a hang on a GPU, an error here.
struct DivergentBarrier {
  A::Out<float> y;
  template <class Block>
  void operator()(const ThreadIndex& t, Block& block) const {
    y.Store(t.thread, 1.f);
    if (t.thread == 0) return;
    block.Sync();
  }
};

TEST(GridEmulatorTest, ABarrierSomeThreadsSkipIsAnError) {
  std::vector<float> y(64);
  GridEmulator emu("DivergentBarrier", 5);
  absl::Status s =
      emu.RunBlocks(LaunchShape{1, 64}, DivergentBarrier{emu.Out<float>(y.data(), 64, "y")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("threads {0} returned while threads {1, 2, 3, 4, ...}"));
  EXPECT_THAT(s.message(), HasSubstr("wait at barrier 0"));
}

TEST(GridEmulatorTest, BadLaunchShapesAreRefused) {
  std::vector<float> y(64);
  GridEmulator emu("DivergentBarrier", 5);
  absl::Status s =
      emu.RunBlocks(LaunchShape{1, 48}, DivergentBarrier{emu.Out<float>(y.data(), 64, "y")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("multiple of 32"));
}

}  // namespace
}  // namespace lockstep::engine::gpu

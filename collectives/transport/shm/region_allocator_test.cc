#include "collectives/transport/shm/region_allocator.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::collectives {
namespace {

struct alignas(64) Region {
  char bytes[64 * 16];
};

TEST(RegionAllocatorTest, BlocksAreAlignedDisjointAndInside) {
  Region r;
  RegionAllocator a(r.bytes, sizeof(r.bytes));
  void* x = a.Allocate(1);
  void* y = a.Allocate(65);
  void* z = a.Allocate(0);
  ASSERT_NE(x, nullptr);
  ASSERT_NE(y, nullptr);
  ASSERT_NE(z, nullptr);
  for (void* p : {x, y, z}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_TRUE(a.Contains(p, 1));
  }
  EXPECT_EQ(static_cast<char*>(y) - static_cast<char*>(x), 64);  // first fit, in order
  EXPECT_EQ(static_cast<char*>(z) - static_cast<char*>(y), 128);
  EXPECT_EQ(a.bytes_free(), sizeof(r.bytes) - 4 * 64);
}

TEST(RegionAllocatorTest, FullRegionReturnsNullAndFreedRunsMerge) {
  Region r;
  RegionAllocator a(r.bytes, sizeof(r.bytes));
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(a.Allocate(64));
  EXPECT_EQ(a.Allocate(1), nullptr);
  EXPECT_EQ(a.bytes_free(), 0u);
  // Free 4..7 out of order: they merge into one run that a 256-byte block fits.
  for (int i : {5, 7, 4, 6}) a.Free(blocks[i]);
  EXPECT_EQ(a.Allocate(257), nullptr);
  void* big = a.Allocate(256);
  EXPECT_EQ(big, blocks[4]);
  for (int i = 0; i < 16; ++i) {
    if (i < 4 || i > 7) a.Free(blocks[i]);
  }
  a.Free(big);
  EXPECT_EQ(a.bytes_free(), sizeof(r.bytes));
  EXPECT_EQ(a.Allocate(sizeof(r.bytes)), r.bytes);  // one run again
}

TEST(RegionAllocatorTest, RandomAllocateFreeNeverOverlaps) {
  alignas(64) static char region[1 << 16];
  RegionAllocator a(region, sizeof(region));
  std::mt19937 rng(7);
  std::vector<std::pair<char*, size_t>> live;
  for (int step = 0; step < 4000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      const size_t i = rng() % live.size();
      // Each block holds its own index byte: an overlap would have overwritten it.
      for (size_t k = 0; k < live[i].second; ++k) ASSERT_EQ(live[i].first[k], char(i % 127));
      a.Free(live[i].first);
      live.erase(live.begin() + i);
      for (size_t j = i; j < live.size(); ++j) std::fill_n(live[j].first, live[j].second, j % 127);
      continue;
    }
    const size_t len = 1 + rng() % 3000;
    char* p = static_cast<char*>(a.Allocate(len));
    if (p == nullptr) continue;
    ASSERT_TRUE(a.Contains(p, len));
    std::fill_n(p, len, char(live.size() % 127));
    live.push_back({p, len});
  }
  for (auto& [p, len] : live) a.Free(p);
  EXPECT_EQ(a.bytes_free(), sizeof(region));
}

TEST(RegionAllocatorTest, ContainsChecksBothEnds) {
  Region r;
  char* const inner = r.bytes + 64;  // the region: [64, 64 + 512) of r
  RegionAllocator a(inner, 512);
  EXPECT_TRUE(a.Contains(inner, 512));
  EXPECT_FALSE(a.Contains(inner, 513));
  EXPECT_FALSE(a.Contains(inner + 512, 1));
  EXPECT_FALSE(a.Contains(inner - 1, 1));
  EXPECT_EQ(a.OffsetOf(inner + 128), 128u);
}

TEST(RegionAllocatorDeathTest, FreeingAForeignPointerAborts) {
  Region r;
  RegionAllocator a(r.bytes, sizeof(r.bytes));
  int x;
  EXPECT_DEATH(a.Free(&x), "was not allocated here");
}

}  // namespace
}  // namespace lockstep::collectives

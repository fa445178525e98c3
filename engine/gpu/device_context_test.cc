#include "engine/gpu/device_context.h"

#include "common/cuda/fake_cuda_api.h"
#include "engine/gpu/device_context_test_body.h"

namespace lockstep::engine::gpu {

struct FakeFactory {
  static absl::StatusOr<std::unique_ptr<CudaApi>> Make() {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{64} << 20;
    absl::StatusOr<std::unique_ptr<FakeCudaApi>> fake = FakeCudaApi::Create(options);
    if (!fake.ok()) return fake.status();
    return std::unique_ptr<CudaApi>(std::move(*fake));
  }
};

using FakeTypes = ::testing::Types<FakeFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(Fake, DeviceContextTest, FakeTypes);

namespace {

using ::testing::HasSubstr;

std::unique_ptr<FakeCudaApi> MakeFake(int devices, size_t bytes) {
  FakeCudaApi::Options options;
  options.device_count = devices;
  options.memory_bytes = bytes;
  return *FakeCudaApi::Create(options);
}

TEST(DeviceContextFakeTest, AMissingSynchronizeReadsStaleData) {
  auto fake = MakeFake(1, 1 << 20);
  auto ctx = *DeviceContext::Create(fake.get(), 0);
  const std::vector<float> in(64, 3.f);
  std::vector<float> out(64, 0.f);
  void* p = *ctx->Allocate(256);
  ASSERT_TRUE(ctx->CopyToDevice(p, in.data(), 256).ok());
  ASSERT_TRUE(ctx->CopyToHost(out.data(), p, 256).ok());
  EXPECT_EQ(out, std::vector<float>(64, 0.f));
  ASSERT_TRUE(ctx->Synchronize().ok());
  EXPECT_EQ(out, in);
}

TEST(DeviceContextFakeTest, ContextsAllocateOnTheirOwnDevice) {
  auto fake = MakeFake(2, 8 << 20);
  auto gpu0 = *DeviceContext::Create(fake.get(), 0);
  auto gpu1 = *DeviceContext::Create(fake.get(), 1);
  void* a = *gpu1->Allocate(1 << 20);
  void* b = *gpu0->Allocate(3000);
  EXPECT_EQ(fake->GetPoolStats(1)->bytes_in_use, uint64_t{1} << 20);
  EXPECT_EQ(fake->GetPoolStats(0)->bytes_in_use, 3072u);
  EXPECT_EQ(gpu1->device(), 1);
  EXPECT_TRUE(gpu1->Free(a).ok());
  EXPECT_TRUE(gpu0->Free(b).ok());
}

// Out of memory with blocks cached: the cache is given back and the allocation succeeds.
TEST(DeviceContextFakeTest, OutOfMemoryGivesTheCacheBackAndRetries) {
  auto fake = MakeFake(1, 8 << 20);
  auto ctx = *DeviceContext::Create(fake.get(), 0);
  std::vector<void*> small;
  for (int i = 0; i < 6; ++i) small.push_back(*ctx->Allocate(1 << 20));
  for (void* p : small) ASSERT_TRUE(ctx->Free(p).ok());
  EXPECT_EQ(ctx->allocator_stats().bytes_reserved, uint64_t{6} << 20);
  absl::StatusOr<void*> big = ctx->Allocate(5 << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(ctx->allocator_stats().bytes_reserved, uint64_t{5} << 20);
  // Now truly out of memory: the error says how much is in use.
  absl::Status full = ctx->Allocate(4 << 20).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr("GPU 0: device 0: out of memory allocating 4194304 bytes"));
  EXPECT_THAT(full.message(), HasSubstr("5242880 bytes in use"));
  EXPECT_TRUE(ctx->Free(*big).ok());
}

TEST(DeviceContextFakeTest, InjectedOutOfMemoryWithAnEmptyCacheIsReported) {
  auto fake = MakeFake(1, 8 << 20);
  auto ctx = *DeviceContext::Create(fake.get(), 0);
  fake->FailAllocation(1);
  absl::Status s = ctx->Allocate(1000).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("injected"));
  EXPECT_TRUE(ctx->Allocate(1000).ok());
}

TEST(DeviceContextFakeTest, AKernelFaultSurfacesAtSynchronize) {
  auto fake = MakeFake(1, 1 << 20);
  auto ctx = *DeviceContext::Create(fake.get(), 0);
  ASSERT_TRUE(fake->Launch(ctx->stream(), "Relu",
                           [] { return absl::InternalError("an illegal memory access in Relu"); })
                  .ok());
  absl::Status s = ctx->Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("GPU 0"));
  EXPECT_THAT(s.message(), HasSubstr("an illegal memory access in Relu"));
  EXPECT_EQ(ctx->Allocate(4 << 20).status().code(), absl::StatusCode::kInternal);
}

// A new job's peak starts from what is in use when it starts, not from an earlier job's.
TEST(DeviceContextFakeTest, ResetAllocatorPeakStartsFromTheBytesInUse) {
  auto fake = MakeFake(1, 8 << 20);
  auto ctx = *DeviceContext::Create(fake.get(), 0);
  void* kept = *ctx->Allocate(1024);
  void* big = *ctx->Allocate(4 << 20);
  ASSERT_TRUE(ctx->Free(big).ok());
  EXPECT_EQ(ctx->allocator_stats().peak_bytes_in_use, (uint64_t{4} << 20) + 1024);
  ctx->ResetAllocatorPeak();
  EXPECT_EQ(ctx->allocator_stats().peak_bytes_in_use, 1024u);
  EXPECT_EQ(ctx->allocator_stats().bytes_reserved, (uint64_t{4} << 20) + 1024);  // still cached
  void* small = *ctx->Allocate(512);
  EXPECT_EQ(ctx->allocator_stats().peak_bytes_in_use, 1536u);
  ASSERT_TRUE(ctx->Free(small).ok());
  ASSERT_TRUE(ctx->Free(kept).ok());
}

}  // namespace
}  // namespace lockstep::engine::gpu

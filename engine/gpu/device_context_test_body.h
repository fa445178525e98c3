// DeviceContext's test body for any CudaApi: instantiated on FakeCudaApi
// (device_context_test.cc, CPU CI) and on RealCudaApi (device_context_gpu_test.cc,
// requires-gpu). A Factory provides `static absl::StatusOr<std::unique_ptr<CudaApi>> Make()`.
#ifndef LOCKSTEP_ENGINE_GPU_DEVICE_CONTEXT_TEST_BODY_H_
#define LOCKSTEP_ENGINE_GPU_DEVICE_CONTEXT_TEST_BODY_H_

#include <numeric>
#include <vector>

#include "engine/gpu/device_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {

template <class Factory>
class DeviceContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaApi>> api = Factory::Make();
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *std::move(api);
    absl::StatusOr<std::unique_ptr<DeviceContext>> ctx = DeviceContext::Create(api_.get(), 0);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = *std::move(ctx);
  }
  void TearDown() override { ctx_.reset(); }

  std::unique_ptr<CudaApi> api_;
  std::unique_ptr<DeviceContext> ctx_;
};

TYPED_TEST_SUITE_P(DeviceContextTest);

TYPED_TEST_P(DeviceContextTest, CopiesRoundTripThroughTheStream) {
  DeviceContext& ctx = *this->ctx_;
  EXPECT_FALSE(ctx.properties().name.empty());
  std::vector<float> in(1000), out(1000, -1.f), zeros(1000, -1.f);
  std::iota(in.begin(), in.end(), 0.f);
  const size_t bytes = in.size() * sizeof(float);
  absl::StatusOr<void*> a = ctx.Allocate(bytes), b = ctx.Allocate(bytes);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ctx.CopyToDevice(*a, in.data(), bytes).ok());
  ASSERT_TRUE(ctx.CopyOnDevice(*b, *a, bytes).ok());
  ASSERT_TRUE(ctx.CopyToHost(out.data(), *b, bytes).ok());
  ASSERT_TRUE(ctx.Zero(*a, bytes).ok());
  ASSERT_TRUE(ctx.CopyToHost(zeros.data(), *a, bytes).ok());
  ASSERT_TRUE(ctx.Synchronize().ok());
  EXPECT_EQ(out, in);
  EXPECT_EQ(zeros, std::vector<float>(1000, 0.f));
  EXPECT_TRUE(ctx.Free(*a).ok());
  EXPECT_TRUE(ctx.Free(*b).ok());
}

// The same allocations step after step come from the cache after the first step: no device
// allocation, and the peak is one step's.
TYPED_TEST_P(DeviceContextTest, StepsAfterTheFirstAllocateNothingFromTheDevice) {
  DeviceContext& ctx = *this->ctx_;
  const std::vector<size_t> sizes = {4096, 1 << 20, 100, 3 << 20, 4096};
  size_t one_step = 0;
  for (size_t s : sizes) one_step += (s + 511) / 512 * 512;
  int64_t after_first = 0;
  for (int step = 0; step < 5; ++step) {
    std::vector<void*> live;
    for (size_t s : sizes) {
      absl::StatusOr<void*> p = ctx.Allocate(s);
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_TRUE(ctx.Zero(*p, s).ok());
      live.push_back(*p);
    }
    for (void* p : live) ASSERT_TRUE(ctx.Free(p).ok());
    if (step == 0) after_first = ctx.allocator_stats().device_allocations;
  }
  ASSERT_TRUE(ctx.Synchronize().ok());
  const AllocatorStats stats = ctx.allocator_stats();
  EXPECT_EQ(stats.device_allocations, after_first);
  EXPECT_EQ(stats.device_allocations, static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(stats.allocations, 5 * static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(stats.bytes_in_use, 0u);
  EXPECT_EQ(stats.peak_bytes_in_use, one_step);
  EXPECT_EQ(stats.bytes_reserved, one_step);
}

// A block freed while work that uses it is still enqueued is reused at once: stream order
// keeps the new owner's work after the old one's.
TYPED_TEST_P(DeviceContextTest, ReuseBeforeSynchronizationIsStreamOrdered) {
  DeviceContext& ctx = *this->ctx_;
  const std::vector<float> first(256, 1.f), second(256, 2.f);
  std::vector<float> out_first(256), out_second(256);
  void* a = *ctx.Allocate(1024);
  ASSERT_TRUE(ctx.CopyToDevice(a, first.data(), 1024).ok());
  ASSERT_TRUE(ctx.CopyToHost(out_first.data(), a, 1024).ok());
  ASSERT_TRUE(ctx.Free(a).ok());
  void* b = *ctx.Allocate(1000);
  EXPECT_EQ(b, a) << "the freed block was not reused";
  ASSERT_TRUE(ctx.CopyToDevice(b, second.data(), 1024).ok());
  ASSERT_TRUE(ctx.CopyToHost(out_second.data(), b, 1024).ok());
  ASSERT_TRUE(ctx.Synchronize().ok());
  EXPECT_EQ(out_first, first);
  EXPECT_EQ(out_second, second);
  EXPECT_TRUE(ctx.Free(b).ok());
}

TYPED_TEST_P(DeviceContextTest, MisuseIsRefusedByName) {
  DeviceContext& ctx = *this->ctx_;
  void* p = *ctx.Allocate(64);
  ASSERT_TRUE(ctx.Free(p).ok());
  absl::Status twice = ctx.Free(p);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument) << twice;
  EXPECT_THAT(twice.message(), ::testing::HasSubstr("GPU 0"));
  EXPECT_THAT(twice.message(), ::testing::HasSubstr("freed twice"));
  absl::Status oom = ctx.Allocate(size_t{1} << 50).status();
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted) << oom;
  EXPECT_THAT(oom.message(), ::testing::HasSubstr("out of memory allocating"));
  absl::Status none = DeviceContext::Create(this->api_.get(), 99).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument) << none;
  EXPECT_THAT(none.message(), ::testing::HasSubstr("no GPU 99"));
  EXPECT_TRUE(ctx.Allocate(0).ok());
}

REGISTER_TYPED_TEST_SUITE_P(DeviceContextTest, CopiesRoundTripThroughTheStream,
                            StepsAfterTheFirstAllocateNothingFromTheDevice,
                            ReuseBeforeSynchronizationIsStreamOrdered, MisuseIsRefusedByName);

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_DEVICE_CONTEXT_TEST_BODY_H_

// Device tensors on FakeCudaApi: allocation from the context's allocator and back, the explicit
// copies, what each refuses (naming the devices), and host access to device memory aborting.
#include "engine/gpu/device_tensor.h"

#include "common/cuda/fake_cuda_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {
namespace {

using ::testing::HasSubstr;

class DeviceTensorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCudaApi::Options options;
    options.device_count = 2;
    options.memory_bytes = 8 << 20;
    fake_ = *FakeCudaApi::Create(options);
    gpu0_ = *DeviceContext::Create(fake_.get(), 0);
    gpu1_ = *DeviceContext::Create(fake_.get(), 1);
  }
  std::unique_ptr<FakeCudaApi> fake_;
  std::unique_ptr<DeviceContext> gpu0_, gpu1_;
};

TEST_F(DeviceTensorTest, RoundTripKeepsBitsAndDevice) {
  const Tensor host = Tensor::FromVector<float>({1.5f, -2.f, 3.25f, 0.f, 7.f, -0.f}, Shape{2, 3});
  absl::StatusOr<Tensor> d = CopyToDevice(*gpu1_, host);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->device().name(), "/gpu:1");
  EXPECT_FALSE(d->on_host());
  EXPECT_EQ(d->DebugString(), "f32[2,3]");
  absl::StatusOr<Tensor> back = CopyToHost(*gpu1_, *d);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->on_host());
  EXPECT_TRUE(back->BitwiseEquals(host));
}

TEST_F(DeviceTensorTest, MemoryComesFromTheContextAndGoesBackWithTheLastTensor) {
  {
    absl::StatusOr<Tensor> t = ZerosOnDevice(*gpu0_, DType::kF32, Shape{1000});
    ASSERT_TRUE(t.ok()) << t.status();
    Tensor alias = *t;
    EXPECT_EQ(gpu0_->allocator_stats().bytes_in_use, 4096u);  // 4000 rounded to 512
    EXPECT_EQ(gpu1_->allocator_stats().bytes_in_use, 0u);
    absl::StatusOr<Tensor> host = CopyToHost(*gpu0_, alias);
    ASSERT_TRUE(host.ok());
    EXPECT_EQ(host->ToVector<float>(), std::vector<float>(1000, 0.f));
  }
  EXPECT_EQ(gpu0_->allocator_stats().bytes_in_use, 0u);
  EXPECT_EQ(gpu0_->allocator_stats().allocations, 1);
}

TEST_F(DeviceTensorTest, ZeroElementTensorsAreValid) {
  absl::StatusOr<Tensor> t = AllocateTensor(*gpu0_, DType::kF32, Shape{0, 4});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->valid());
  EXPECT_EQ(t->num_elements(), 0);
}

TEST_F(DeviceTensorTest, CopyIntoOverwritesInStreamOrder) {
  Tensor d = *ZerosOnDevice(*gpu0_, DType::kF32, Shape{3});
  const Tensor host = Tensor::FromVector<float>({4, 5, 6}, Shape{3});
  ASSERT_TRUE(CopyInto(*gpu0_, host, &d).ok());
  EXPECT_EQ(CopyToHost(*gpu0_, d)->ToVector<float>(), (std::vector<float>{4, 5, 6}));
  const Tensor wrong = Tensor::FromVector<float>({1, 2}, Shape{2});
  absl::Status s = CopyInto(*gpu0_, wrong, &d);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("f32[2] into f32[3]"));
}

TEST_F(DeviceTensorTest, RefusesTensorsOnTheWrongSideNamingDevices) {
  const Tensor host = Tensor::FromVector<float>({1, 2}, Shape{2});
  Tensor on1 = *CopyToDevice(*gpu1_, host);
  absl::StatusOr<Tensor> r = CopyToDevice(*gpu0_, on1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("CopyToDevice to /gpu:0"));
  EXPECT_THAT(r.status().message(), HasSubstr("is on /gpu:1, not on the host"));
  r = CopyToHost(*gpu0_, on1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("CopyToHost on /gpu:0"));
  EXPECT_THAT(r.status().message(), HasSubstr("is on /gpu:1"));
  r = CopyToHost(*gpu0_, host);
  EXPECT_THAT(r.status().message(), HasSubstr("is on /cpu:0"));
  r = CopyToDevice(*gpu0_, Tensor());
  EXPECT_THAT(r.status().message(), HasSubstr("an empty tensor"));
}

TEST_F(DeviceTensorTest, OutOfMemoryIsAStatus) {
  fake_->FailAllocation(1);
  absl::StatusOr<Tensor> t = AllocateTensor(*gpu0_, DType::kF32, Shape{16});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted) << t.status();
  EXPECT_THAT(t.status().message(), HasSubstr("injected"));
  EXPECT_TRUE(AllocateTensor(*gpu0_, DType::kF32, Shape{16}).ok());
}

using DeviceTensorDeathTest = DeviceTensorTest;

TEST_F(DeviceTensorDeathTest, HostAccessToDeviceMemoryAbortsNamingTheTensor) {
  Tensor d = *ZerosOnDevice(*gpu1_, DType::kF32, Shape{2, 2});
  EXPECT_DEATH(d.data<float>(), "host access to the /gpu:1 tensor f32\\[2,2\\].*CopyToHost");
  EXPECT_DEATH(d.ToVector<float>(), "host access to the /gpu:1 tensor");
  EXPECT_DEATH(d.Clone(), "/gpu:1");
  const Tensor host = Tensor::FromVector<float>({1}, Shape{1});
  EXPECT_DEATH(host.device_data<float>(), "device access to the /cpu:0 tensor f32\\[1\\]");
  EXPECT_DEATH(Tensor(DType::kF32, Shape{1}, Device(Device::Type::kCuda, 0)),
               "host buffer was allocated for the /gpu:0 tensor");
}

}  // namespace
}  // namespace lockstep::engine::gpu

// Global-norm clipping of the Optimizer on a fake "/gpu:0" (FakeCudaApi, the grid emulator,
// FakeBlasApi) against the same Optimizer on the host: it clips when the norm is above the
// bound and not below it, for SGD, Momentum and Adam, within the tolerance optimizer.h states
// (the device sums the squares in a block tree, not the host's order: the f32 scale may be one
// ulp off); and a step moves no gradient to the host and never waits for the device.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cuda/fake_cuda_api.h"
#include "engine/device_test_env.h"
#include "engine/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

class OptimizerGpuClipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{64} << 20;
    auto fake = FakeCudaApi::Create(options);
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = fake->get();
    auto context = gpu::DeviceContext::Create(fake_, 0);
    ASSERT_TRUE(context.ok()) << context.status();
    gpu::EmulatedKernels::Options grid;
    grid.max_blocks = 3;  // SumSquares' 64 partials over 3 blocks: its block loop turns
    grid.threads = 64;
    auto kernels = std::make_unique<gpu::EmulatedKernels>(fake_, grid);
    auto blas = std::make_unique<gpu::FakeBlasApi>(fake_);
    env_ = std::make_unique<GpuDeviceEnv>(*std::move(fake), *std::move(context), std::move(kernels),
                                          std::move(blas));
  }

  FakeCudaApi* fake_ = nullptr;
  std::unique_ptr<DeviceEnv> env_;
};

const std::vector<VariableInfo> kVariables = {
    VariableInfo{"dense/kernel", Shape{37, 11}, DType::kF32, true, 0},
    VariableInfo{"dense/bias", Shape{11}, DType::kF32, true, 0},
    VariableInfo{"bn/moving_mean", Shape{11}, DType::kF32, false, 0},
};

v1::OptimizerSpec Spec(const std::string& kind, double clipnorm) {
  v1::OptimizerSpec spec;
  if (kind == "sgd") spec.mutable_sgd();
  if (kind == "momentum") spec.mutable_momentum()->set_nesterov(true);
  if (kind == "adam") spec.mutable_adam();
  spec.mutable_learning_rate()->mutable_constant()->set_value(0.1);
  spec.set_global_clipnorm(clipnorm);
  return spec;
}

// The gradients of step `step`: their global norm is about 11 (407 + 11 values in [-1, 1]).
std::vector<Tensor> Gradients(int step) {
  std::vector<Tensor> g;
  for (size_t v = 0; v < kVariables.size(); ++v) {
    const Shape& shape = kVariables[v].shape;
    g.push_back(Tensor::FromVector(Random(shape.num_elements(), 10 * step + v), shape));
  }
  return g;
}

TEST_F(OptimizerGpuClipTest, ClipsOnTheDeviceLikeTheHostWithoutCopyingGradients) {
  for (const std::string kind : {"sgd", "momentum", "adam"}) {
    for (const double clipnorm : {1.0, 1000.0}) {  // clips; within the bound
      SCOPED_TRACE(kind + " clipnorm " + std::to_string(clipnorm));
      const v1::OptimizerSpec spec = Spec(kind, clipnorm);
      auto host_opt = Optimizer::Create(spec, kVariables);
      auto gpu_opt = Optimizer::Create(spec, kVariables, env_->gpu());
      ASSERT_TRUE(host_opt.ok()) << host_opt.status();
      ASSERT_TRUE(gpu_opt.ok()) << gpu_opt.status();
      std::vector<Tensor> host_w;
      for (const VariableInfo& v : kVariables) {
        host_w.push_back(Tensor::FromVector(Random(v.shape.num_elements(), 99), v.shape));
      }
      auto gpu_w = env_->ToDevice(host_w);
      ASSERT_TRUE(gpu_w.ok()) << gpu_w.status();
      for (int step = 0; step < 3; ++step) {
        const std::vector<Tensor> g = Gradients(step);
        auto gpu_g = env_->ToDevice(g);
        ASSERT_TRUE(gpu_g.ok()) << gpu_g.status();
        std::vector<Tensor> host_before;
        for (const Tensor& t : host_w) host_before.push_back(t.Clone());
        ASSERT_TRUE(host_opt->get()->Apply(g, &host_w).ok());

        const FakeCudaApi::Counters before = fake_->counters();
        const absl::Status applied = gpu_opt->get()->Apply(*gpu_g, &*gpu_w);
        const FakeCudaApi::Counters after = fake_->counters();
        ASSERT_TRUE(applied.ok()) << applied;
        EXPECT_EQ(after.pageable_copies + after.pinned_copies,
                  before.pageable_copies + before.pinned_copies)
            << "a step copies nothing between host and device";
        EXPECT_EQ(after.host_waits, before.host_waits) << "a step never waits for the device";

        // The norm: the host's within optimizer.h's bound (418 terms), one 8-byte read back.
        const double host_norm = host_opt->get()->last_gradient_norm();
        ASSERT_GT(host_norm, 5);
        EXPECT_NEAR(gpu_opt->get()->last_gradient_norm(), host_norm, 418 * 0x1p-53 * host_norm);
        EXPECT_EQ(fake_->counters().pageable_copies, after.pageable_copies + 1);

        auto got = env_->ToHost(*gpu_w);
        ASSERT_TRUE(got.ok()) << got.status();
        for (size_t v = 0; v < kVariables.size(); ++v) {
          const std::vector<float> want = host_w[v].ToVector<float>();
          const std::vector<float> have = (*got)[v].ToVector<float>();
          for (size_t i = 0; i < want.size(); ++i) {
            // One f32 ulp of the scale moves an update by 2^-24 of itself (|update| < 1).
            ASSERT_NEAR(have[i], want[i], 1e-6f * std::max(1.f, std::fabs(want[i])))
                << kVariables[v].name << "[" << i << "] step " << step;
          }
        }
        if (kind == "sgd") {  // the step is lr * the (clipped) gradient: its norm says it
          double moved = 0;
          for (size_t v = 0; v < 2; ++v) {
            const std::vector<float> a = host_before[v].ToVector<float>();
            const std::vector<float> b = (*got)[v].ToVector<float>();
            for (size_t i = 0; i < a.size(); ++i) moved += double(b[i] - a[i]) * (b[i] - a[i]);
          }
          const double want = 0.1 * std::min(clipnorm, host_norm);
          EXPECT_NEAR(std::sqrt(moved), want, 1e-4 * want)
              << (clipnorm < host_norm ? "clipped to the bound" : "not clipped");
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::engine

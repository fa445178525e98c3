// The sequence-model kernels below the ops (the op-level comparisons with the CPU kernels are
// engine/seq_ops_test): the portable Philox and GELU lanes against the engine's own
// (engine/philox.h, engine/kernels/cpu/vector_math.h) over many inputs, bit for bit, and the
// launch-time refusals of EmulatedKernels' "Sequence models" block, each naming the kernel.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/cuda/fake_cuda_api.h"
#include "engine/kernels/cpu/vector_math.h"
#include "engine/kernels/gpu/emulated_kernels.h"
#include "engine/kernels/gpu/kernel_bodies_seq.h"
#include "engine/philox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {
namespace {

using ::testing::HasSubstr;

TEST(SeqKernelBodies, PhiloxIsTheEnginesGenerator) {
  int checked = 0;
  for (uint64_t key : {uint64_t{0}, uint64_t{1}, MixKey(0x5eed, 7), ~uint64_t{0}}) {
    const Philox engine(key);
    for (uint64_t counter : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, uint64_t{0xffffffff},
                             uint64_t{1} << 32, (uint64_t{1} << 40) + 5, ~uint64_t{0}}) {
      const Philox::Block want = engine.Generate(counter);
      const PhiloxWords got = PhiloxGenerate(key, counter);
      for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(got.w[j], want[j]) << "key " << key << " counter " << counter << " word " << j;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 28);
}

// GELU's forward and gradient lanes are vector_math's AVX2 lanes, op for op: equal bits for
// values across and past the clamps of erf (|x / sqrt 2| = 4) and exp (-88.38).
TEST(SeqKernelBodies, GeluLanesAreVectorMaths) {
  std::vector<float> x;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> wide(-14.f, 14.f), narrow(-1.f, 1.f);
  for (int i = 0; i < 20000; ++i) x.push_back(i % 2 ? wide(rng) : narrow(rng));
  for (float v : {0.f, -0.f, 5.656854f, -5.656854f, 13.3f, -13.3f, 1e-30f, -1e-30f, 100.f, -100.f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> dy(n), want_y(n), want_dx(n);
  for (int64_t i = 0; i < n; ++i) dy[i] = 0.5f + float(i % 7);
  cpu::GeluForward(x.data(), want_y.data(), n);
  cpu::GeluBackward(x.data(), dy.data(), want_dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float y = x[i] * LanePhi(x[i]);
    const float density = 0.3989422804014327f * LaneExp(-0.5f * (x[i] * x[i]));
    const float dx = dy[i] * fmaf(x[i], density, LanePhi(x[i]));
    ASSERT_EQ(std::memcmp(&y, &want_y[i], sizeof(float)), 0)
        << "GELU(" << x[i] << ") = " << y << ", vector_math " << want_y[i];
    ASSERT_EQ(std::memcmp(&dx, &want_dx[i], sizeof(float)), 0)
        << "GELU'(" << x[i] << ") = " << dx << ", vector_math " << want_dx[i];
  }
}

class SeqLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<FakeCudaApi>> fake = FakeCudaApi::Create({});
    ASSERT_TRUE(fake.ok()) << fake.status();
    fake_ = *std::move(fake);
    kernels_ = std::make_unique<EmulatedKernels>(fake_.get());
    stream_ = *fake_->StreamCreate();
    a_ = static_cast<float*>(*fake_->Malloc(64 * sizeof(float)));
    b_ = static_cast<float*>(*fake_->Malloc(64 * sizeof(float)));
  }
  void TearDown() override {
    EXPECT_TRUE(fake_->StreamSynchronize(stream_).ok());
    EXPECT_TRUE(fake_->Free(a_).ok());
    EXPECT_TRUE(fake_->Free(b_).ok());
    EXPECT_TRUE(fake_->StreamDestroy(stream_).ok());
  }
  static void ExpectInvalid(const absl::Status& s, const char* text) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(text));
  }

  std::unique_ptr<FakeCudaApi> fake_;
  std::unique_ptr<EmulatedKernels> kernels_;
  CudaStream stream_{};
  float* a_ = nullptr;
  float* b_ = nullptr;
};

TEST_F(SeqLaunchTest, BadArgumentsAreRefusedNamingTheKernel) {
  ExpectInvalid(kernels_->Activation(ActivationOp::kTanh, a_, b_, -1, stream_),
                "Activation: negative element count -1");
  ExpectInvalid(kernels_->Binary(BinaryOp::kMul, a_, nullptr, b_, 4, stream_),
                "Binary: buffer 1 is null with 4 elements");
  ExpectInvalid(kernels_->LayerNorm(a_, a_, a_, b_, 2, -3, 1e-5f, stream_),
                "LayerNorm: negative shape [2, -3]");
  ExpectInvalid(kernels_->SliceColumns(a_, 8, 6, b_, 2, 3, stream_),
                "SliceColumns: columns [6, 9) of rows of 8");
  ConcatPlan empty;
  ExpectInvalid(kernels_->Concat(empty, b_, stream_), "Concat: 0 inputs");
  ConcatPlan wide;
  wide.inputs = kMaxConcatInputs + 1;
  ExpectInvalid(kernels_->Concat(wide, b_, stream_), "Concat: 9 inputs");
  ReducePlan deep;
  deep.rank = kMaxRank + 1;
  ExpectInvalid(kernels_->Reduce(deep, false, a_, b_, stream_), "Reduce: rank 9 is outside");
  ExpectInvalid(kernels_->Gather(nullptr, IndexType::kI64, a_, b_, 4, 4, 2, stream_),
                "Gather: buffer 0 is null with 4 elements");
}

// A buffer that does not hold what the launch reads (64 floats, not 8 x 16) is refused at the
// launch, naming the kernel and the buffer: on a GPU it would read past its allocation.
TEST_F(SeqLaunchTest, BuffersOutsideTheirAllocationAreRefused) {
  absl::Status s = kernels_->LayerNorm(a_, a_, a_, b_, 8, 16, 1e-5f, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("LayerNorm"));
  s = kernels_->EmbeddingGrad(a_, IndexType::kF32, a_, b_, 8, 100, 4, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("dtable"));
}

// Every output element written exactly once on every grid: a launch over all of `a` runs
// clean, and the results reach the host.
TEST_F(SeqLaunchTest, LaunchesRunOnTheStream) {
  std::vector<float> host(64);
  for (int i = 0; i < 64; ++i) host[i] = float(i % 5) - 2.f;
  ASSERT_TRUE(
      fake_->MemcpyAsync(a_, host.data(), 64 * sizeof(float), CopyKind::kHostToDevice, stream_)
          .ok());
  ASSERT_TRUE(kernels_->ArgmaxRows(a_, reinterpret_cast<int64_t*>(b_), 8, 8, stream_).ok());
  std::vector<int64_t> idx(8);
  ASSERT_TRUE(
      fake_->MemcpyAsync(idx.data(), b_, 8 * sizeof(int64_t), CopyKind::kDeviceToHost, stream_)
          .ok());
  ASSERT_TRUE(fake_->StreamSynchronize(stream_).ok());
  for (int r = 0; r < 8; ++r) {
    int64_t best = 0;
    for (int j = 1; j < 8; ++j) {
      if (host[r * 8 + best] < host[r * 8 + j]) best = j;
    }
    EXPECT_EQ(idx[r], best) << "row " << r;
  }
}

}  // namespace
}  // namespace lockstep::engine::gpu

// BlasApi's contract (blas_api_contract_test.h) on FakeBlasApi, plus what only the fake shows:
// the translation to column-major, lazy streams, and buffers outside device memory.
#include "engine/kernels/gpu/fake_blas_api.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/hash/hash.h"
#include "engine/kernels/gpu/blas_api_contract_test.h"

namespace lockstep::engine::gpu {
namespace {

struct FakeBackend {
  static absl::StatusOr<BlasBackend> Make() {
    absl::StatusOr<std::unique_ptr<FakeCudaApi>> fake = FakeCudaApi::Create();
    if (!fake.ok()) return fake.status();
    BlasBackend b;
    b.blas = std::make_unique<FakeBlasApi>(fake->get());
    b.api = *std::move(fake);
    return b;
  }
};

using FakeBackends = ::testing::Types<FakeBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Fake, BlasApiContractTest, FakeBackends);

TEST(ToColumnMajorTest, SwapsOperandsAndDimensionsKeepingTranspositions) {
  float a[1], b[1], c[1], bias[1];
  GemmArgs g;
  g.m = 3;
  g.n = 5;
  g.k = 7;
  g.trans_a = true;
  g.a = a;
  g.b = b;
  g.c = c;
  g.epilogue = Epilogue::kBias;
  g.bias = bias;
  const ColumnMajorGemm cm = ToColumnMajor(g);
  EXPECT_EQ(cm.a, b);
  EXPECT_EQ(cm.b, a);
  EXPECT_EQ(cm.c, c);
  EXPECT_EQ(cm.bias, bias);
  EXPECT_EQ(cm.rows, 5);
  EXPECT_EQ(cm.cols, 3);
  EXPECT_EQ(cm.depth, 7);
  EXPECT_FALSE(cm.trans_a);
  EXPECT_TRUE(cm.trans_b);
  EXPECT_EQ(cm.lda, 5);  // B stored [k, n]
  EXPECT_EQ(cm.ldb, 3);  // A stored [k, m] (transposed)
  EXPECT_EQ(cm.ldc, 5);
}

// RealBlasApi's plan cache key: the same plan for another call's pointers, alpha and beta;
// another plan for any other transposition, size, leading dimension, epilogue or operand type.
TEST(GemmPlanKeyTest, KeysEverythingButPointersAlphaAndBeta) {
  float a[1], b[1], c[1], bias[1], other[1];
  GemmArgs g;
  g.m = 3;
  g.n = 5;
  g.k = 7;
  g.a = a;
  g.b = b;
  g.c = c;
  g.epilogue = Epilogue::kBias;
  g.bias = bias;
  const GemmPlanKey key = GemmPlanKey::Of(ToColumnMajor(g));
  GemmArgs same = g;
  same.a = other;
  same.b = other;
  same.c = other;
  same.bias = other;
  same.alpha = 2;
  same.beta = 1;
  EXPECT_EQ(GemmPlanKey::Of(ToColumnMajor(same)), key);
  EXPECT_EQ(absl::HashOf(GemmPlanKey::Of(ToColumnMajor(same))), absl::HashOf(key));
  std::vector<GemmArgs> others(7, g);
  others[0].trans_a = true;
  others[1].trans_b = true;
  others[2].m = 4;
  others[3].n = 6;
  others[4].k = 8;
  others[5].epilogue = Epilogue::kBiasRelu;
  others[6].operands = GemmOperands::kBF16;
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_FALSE(GemmPlanKey::Of(ToColumnMajor(others[i])) == key) << i;
  }
}

class FakeBlasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<FakeCudaApi>> f = FakeCudaApi::Create();
    ASSERT_TRUE(f.ok()) << f.status();
    fake_ = *std::move(f);
    blas_ = std::make_unique<FakeBlasApi>(fake_.get());
    absl::StatusOr<CudaStream> s = fake_->StreamCreate();
    ASSERT_TRUE(s.ok());
    stream_ = *s;
  }
  float* Alloc(size_t n) {
    absl::StatusOr<void*> p = fake_->Malloc(n * sizeof(float));
    EXPECT_TRUE(p.ok());
    return static_cast<float*>(*p);
  }
  std::unique_ptr<FakeCudaApi> fake_;
  std::unique_ptr<FakeBlasApi> blas_;
  CudaStream stream_ = nullptr;
};

TEST_F(FakeBlasTest, RunsOnlyWhenTheStreamRuns) {
  float *a = Alloc(4), *b = Alloc(4), *c = Alloc(4);
  const float ones[4] = {1, 1, 1, 1};
  for (float* p : {a, b}) std::memcpy(fake_->HostView(p), ones, sizeof(ones));
  std::memset(fake_->HostView(c), 0, 4 * sizeof(float));
  GemmArgs g;
  g.m = g.n = g.k = 2;
  g.a = a;
  g.b = b;
  g.c = c;
  ASSERT_TRUE(blas_->Gemm(g, stream_).ok());
  EXPECT_EQ(blas_->calls(), 1);
  EXPECT_EQ(*fake_->PendingWork(stream_), 1);
  EXPECT_EQ(fake_->HostView(c)[0], 0.f);  // not run yet: a missing synchronisation shows
  ASSERT_TRUE(fake_->StreamSynchronize(stream_).ok());
  EXPECT_EQ(fake_->HostView(c)[0], 2.f);
  EXPECT_EQ(fake_->HostView(c)[3], 2.f);
}

TEST_F(FakeBlasTest, RefusesHostMemoryAndUnpackedOperands) {
  float host[4] = {};
  float* d = Alloc(16);
  GemmArgs g;
  g.m = g.n = g.k = 2;
  g.a = host;
  g.b = d;
  g.c = d;
  absl::Status s = blas_->Gemm(g, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("FakeBlasApi::Gemm"));
  EXPECT_EQ(blas_->calls(), 0);

  ColumnMajorGemm cm = ToColumnMajor(GemmArgs{false, false, 2, 2, 2, 1, d, d, 0, d});
  cm.lda = 1;  // below the stored rows
  s = blas_->ColumnMajor(cm, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("lda 1 is below the stored rows 2"));
  cm.lda = 3;
  s = blas_->ColumnMajor(cm, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("not packed"));
}

TEST(RoundToTf32Test, KeepsTenMantissaBitsToNearestEven) {
  EXPECT_EQ(RoundToTf32(1.f + 0x1p-10f), 1.f + 0x1p-10f);             // representable
  EXPECT_EQ(RoundToTf32(1.f + 0x1p-11f), 1.f);                        // tie: to even
  EXPECT_EQ(RoundToTf32(1.f + 3 * 0x1p-11f), 1.f + 0x1p-9f);          // tie: to even
  EXPECT_EQ(RoundToTf32(1.f + 0x1p-11f + 0x1p-20f), 1.f + 0x1p-10f);  // above the tie
  EXPECT_EQ(RoundToTf32(-(1.f + 0x1p-11f + 0x1p-20f)), -(1.f + 0x1p-10f));
  EXPECT_EQ(RoundToTf32(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity())
      << "rounds up past the largest TF32";
  EXPECT_EQ(RoundToTf32(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(RoundToTf32(std::nanf(""))));
}

// TF32 is a per-call choice: allowed, the fake multiplies the operands rounded to TF32 (as
// tensor cores do), so operands with low mantissa bits give another result than f32, exactly
// the CPU GEMM of the rounded operands; not allowed, the exact f32 path.
TEST_F(FakeBlasTest, AllowTf32RoundsTheF32OperandsOnlyWhenAllowed) {
  constexpr int64_t m = 3, n = 4, k = 5;
  std::vector<float> ha(m * k), hb(k * n);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = 1.f + (2 * i + 1) * 0x1p-16f;  // below TF32's
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = 1.f + (i + 1) * 0x1p-16f;
  float *a = Alloc(m * k), *b = Alloc(k * n), *c = Alloc(m * n);
  std::memcpy(fake_->HostView(a), ha.data(), ha.size() * sizeof(float));
  std::memcpy(fake_->HostView(b), hb.data(), hb.size() * sizeof(float));
  auto run = [&](bool allow_tf32) {
    GemmArgs g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a;
    g.b = b;
    g.c = c;
    g.allow_tf32 = allow_tf32;
    EXPECT_TRUE(blas_->Gemm(g, stream_).ok());
    EXPECT_TRUE(fake_->StreamSynchronize(stream_).ok());
    const float* out = fake_->HostView(c);
    return std::vector<float>(out, out + m * n);
  };
  auto reference = [&](bool rounded) {  // row-major C = A B, in order, f32
    std::vector<float> out(m * n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const float x = ha[i * k + p], y = hb[p * n + j];
          acc += rounded ? RoundToTf32(x) * RoundToTf32(y) : x * y;
        }
        out[i * n + j] = acc;
      }
    }
    return out;
  };
  const std::vector<float> f32 = run(false), tf32 = run(true);
  const std::vector<float> want_f32 = reference(false), want_tf32 = reference(true);
  for (int64_t i = 0; i < m * n; ++i) {
    EXPECT_NEAR(f32[i], want_f32[i], 1e-6f * std::fabs(want_f32[i])) << i;
    EXPECT_NEAR(tf32[i], want_tf32[i], 1e-6f * std::fabs(want_tf32[i])) << i;
    // The operands' low bits are below TF32's: their product differs from f32's by far more
    // than f32's rounding.
    EXPECT_GT(std::fabs(tf32[i] - f32[i]), 1e-5f * std::fabs(f32[i])) << i;
  }
}

}  // namespace
}  // namespace lockstep::engine::gpu

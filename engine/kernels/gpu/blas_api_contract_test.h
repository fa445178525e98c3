// One test body for BlasApi, instantiated for FakeBlasApi on FakeCudaApi (fake_blas_api_test,
// CPU CI) and for RealBlasApi on RealCudaApi (real_blas_api_test, requires-gpu). Products of
// small integers are exact in f32 whatever the summation order (TF32 is off), so every
// product is compared with a naive row-major reference bit for bit; rectangular shapes of
// distinct m, n, k in every transposition make a swapped operand or dimension fail. GELU
// (tanh, transcendental) is compared within kGeluRelTolerance. bf16 operands (GemmOperands::
// kBF16) hold the same small integers, exact in bf16, so their products are checked bit for bit
// too, and a sum that bf16 cannot hold (511) shows that they accumulate in f32.
//
// A Backend type provides `static absl::StatusOr<BlasBackend> Make()`.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_BLAS_API_CONTRACT_TEST_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_BLAS_API_CONTRACT_TEST_H_

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/bfloat16.h"
#include "common/cuda/cuda_api.h"
#include "engine/kernels/gpu/blas_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {

struct BlasBackend {
  std::unique_ptr<CudaApi> api;
  std::unique_ptr<BlasApi> blas;  // may borrow *api
};

inline constexpr double kGeluRelTolerance = 1e-5;

// Small integers in [-4, 4]: every product and partial sum below is exact in f32.
inline std::vector<float> SmallInts(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(-4, 4);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(u(rng));
  return v;
}

// Row-major reference: C = alpha op(A) op(B) + beta C (+ bias per column, then relu), in double.
inline std::vector<double> ReferenceGemm(const GemmArgs& g, const std::vector<float>& a,
                                         const std::vector<float>& b, const std::vector<float>& c,
                                         const std::vector<float>& bias) {
  std::vector<double> out(g.m * g.n);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double x = g.trans_a ? a[p * g.m + i] : a[i * g.k + p];
        const double y = g.trans_b ? b[j * g.k + p] : b[p * g.n + j];
        s += x * y;
      }
      double v = g.alpha * s + g.beta * c[i * g.n + j];
      if (EpilogueHasBias(g.epilogue)) v += bias[j];
      if (g.epilogue == Epilogue::kRelu || g.epilogue == Epilogue::kBiasRelu) v = v > 0 ? v : 0;
      if (g.epilogue == Epilogue::kGelu || g.epilogue == Epilogue::kBiasGelu) {
        v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      }
      out[i * g.n + j] = v;
    }
  }
  return out;
}

template <typename Backend>
class BlasApiContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<BlasBackend> b = Backend::Make();
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
    absl::StatusOr<CudaStream> s = api().StreamCreate();
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = *s;
  }
  void TearDown() override {
    for (void* p : allocations_) EXPECT_TRUE(api().Free(p).ok());
    if (stream_ != nullptr) {
      EXPECT_TRUE(api().StreamDestroy(stream_).ok());
    }
  }
  CudaApi& api() { return *backend_.api; }
  BlasApi& blas() { return *backend_.blas; }

  float* Upload(const std::vector<float>& host) {
    absl::StatusOr<void*> p = api().Malloc(std::max<size_t>(host.size(), 1) * sizeof(float));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return nullptr;
    allocations_.push_back(*p);
    EXPECT_TRUE(api()
                    .MemcpyAsync(*p, host.data(), host.size() * sizeof(float),
                                 CopyKind::kHostToDevice, stream_)
                    .ok());
    return static_cast<float*>(*p);
  }
  // The values rounded to bf16, on the device (bf16 operands).
  const uint16_t* UploadBf16(const std::vector<float>& host) {
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i) bits[i] = FloatToBFloat16(host[i]);
    absl::StatusOr<void*> p = api().Malloc(std::max<size_t>(bits.size(), 1) * sizeof(uint16_t));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return nullptr;
    allocations_.push_back(*p);
    EXPECT_TRUE(api()
                    .MemcpyAsync(*p, bits.data(), bits.size() * sizeof(uint16_t),
                                 CopyKind::kHostToDevice, stream_)
                    .ok());
    // The copy reads `bits` when the stream runs it.
    EXPECT_TRUE(api().StreamSynchronize(stream_).ok());
    return static_cast<const uint16_t*>(*p);
  }
  std::vector<float> Download(const float* p, size_t n) {
    std::vector<float> host(n);
    EXPECT_TRUE(
        api()
            .MemcpyAsync(host.data(), p, n * sizeof(float), CopyKind::kDeviceToHost, stream_)
            .ok());
    absl::Status s = api().StreamSynchronize(stream_);
    EXPECT_TRUE(s.ok()) << s;
    return host;
  }

  // Runs `g` (dimensions, flags, alpha, beta, epilogue set; buffers filled here) and compares
  // every element with the reference: exactly, or within kGeluRelTolerance for GELU.
  void Check(GemmArgs g, uint64_t seed) {
    const std::vector<float> a = SmallInts(g.m * g.k, seed);
    const std::vector<float> b = SmallInts(g.k * g.n, seed + 1);
    const std::vector<float> c = SmallInts(g.m * g.n, seed + 2);
    const std::vector<float> bias = SmallInts(g.n, seed + 3);
    const bool bf16 = g.operands == GemmOperands::kBF16;  // small integers: exact in bf16
    g.a = bf16 ? static_cast<const void*>(UploadBf16(a)) : Upload(a);
    g.b = bf16 ? static_cast<const void*>(UploadBf16(b)) : Upload(b);
    g.c = Upload(c);
    g.bias = EpilogueHasBias(g.epilogue) ? Upload(bias) : nullptr;
    absl::Status s = blas().Gemm(g, stream_);
    ASSERT_TRUE(s.ok()) << s;
    const std::vector<float> got = Download(g.c, g.m * g.n);
    ASSERT_EQ(got.size(), static_cast<size_t>(g.m * g.n));
    const std::vector<double> want = ReferenceGemm(g, a, b, c, bias);
    ASSERT_EQ(got.size(), want.size());
    const bool gelu = g.epilogue == Epilogue::kGelu || g.epilogue == Epilogue::kBiasGelu;
    for (size_t i = 0; i < got.size(); ++i) {
      if (gelu) {
        ASSERT_NEAR(got[i], want[i], kGeluRelTolerance * std::max(1.0, std::fabs(want[i])))
            << "element " << i;
      } else {
        ASSERT_EQ(got[i], static_cast<float>(want[i]))
            << "element " << i << " (row " << i / g.n << ", column " << i % g.n << ")";
      }
    }
  }

  BlasBackend backend_;
  CudaStream stream_ = nullptr;
  std::vector<void*> allocations_;
};

TYPED_TEST_SUITE_P(BlasApiContractTest);

TYPED_TEST_P(BlasApiContractTest, EveryTranspositionOfRectangularShapesIsExact) {
  struct Dims {
    int64_t m, n, k;
  };
  const Dims shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {64, 10, 128}, {2, 200, 3}};
  int checked = 0;
  for (GemmOperands operands : {GemmOperands::kF32, GemmOperands::kBF16}) {
    for (const Dims& d : shapes) {
      for (int t = 0; t < 4; ++t) {
        GemmArgs g;
        g.m = d.m;
        g.n = d.n;
        g.k = d.k;
        g.trans_a = t & 1;
        g.trans_b = t & 2;
        g.operands = operands;
        SCOPED_TRACE(::testing::Message()
                     << GemmOperandsName(operands) << " m=" << d.m << " n=" << d.n << " k=" << d.k
                     << " trans_a=" << g.trans_a << " trans_b=" << g.trans_b);
        this->Check(g, 100 + checked);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 40);
}

// 256 + 255 * 1 = 511: exact in f32 in any order of the sum, but not a bf16 value (bf16 holds
// the even numbers between 256 and 512), so a product that accumulated in bf16 fails here.
TYPED_TEST_P(BlasApiContractTest, Bf16OperandsAccumulateInF32) {
  const int64_t k = 256;
  std::vector<float> ones(k, 1.f), b(k, 1.f);
  b[0] = 256.f;
  GemmArgs g;
  g.m = 1;
  g.n = 1;
  g.k = k;
  g.operands = GemmOperands::kBF16;
  g.a = this->UploadBf16(ones);
  g.b = this->UploadBf16(b);
  g.c = this->Upload({0.f});
  ASSERT_TRUE(this->blas().Gemm(g, this->stream_).ok());
  EXPECT_EQ(this->Download(g.c, 1)[0], 511.f);
  EXPECT_NE(RoundToBFloat16(511.f), 511.f);  // the control: bf16 cannot hold the sum
}

TYPED_TEST_P(BlasApiContractTest, AlphaAndBetaAccumulate) {
  GemmArgs g;
  g.m = 6;
  g.n = 4;
  g.k = 5;
  for (GemmOperands operands : {GemmOperands::kF32, GemmOperands::kBF16}) {
    SCOPED_TRACE(GemmOperandsName(operands));
    g.operands = operands;
    g.trans_a = false;
    g.alpha = 2;
    g.beta = 1;
    this->Check(g, 7);
    g.trans_a = true;
    g.alpha = -1;
    g.beta = 0.5f;
    this->Check(g, 8);
  }
}

TYPED_TEST_P(BlasApiContractTest, EpiloguesAddTheBiasPerColumnThenActivate) {
  const Epilogue epilogues[] = {Epilogue::kBias, Epilogue::kRelu, Epilogue::kBiasRelu,
                                Epilogue::kGelu, Epilogue::kBiasGelu};
  int checked = 0;
  for (Epilogue e : epilogues) {
    for (int t = 0; t < 4; ++t) {
      GemmArgs g;
      g.m = 7;
      g.n = 5;  // bias[n]: a bias applied per row instead would need m elements
      g.k = 3;
      g.trans_a = t & 1;
      g.trans_b = t & 2;
      g.epilogue = e;
      SCOPED_TRACE(::testing::Message() << EpilogueName(e) << " t=" << t);
      this->Check(g, 300 + checked);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 20);
}

TYPED_TEST_P(BlasApiContractTest, EmptyOutputIsANoOp) {
  GemmArgs g;
  g.m = 0;
  g.n = 4;
  g.k = 3;
  g.b = this->Upload(SmallInts(12, 1));
  EXPECT_TRUE(this->blas().Gemm(g, this->stream_).ok());
  EXPECT_TRUE(this->api().StreamSynchronize(this->stream_).ok());
}

TYPED_TEST_P(BlasApiContractTest, RefusesBadArgumentsNamingThem) {
  float* x = this->Upload(SmallInts(16, 1));
  GemmArgs g;
  g.m = g.n = g.k = 2;
  g.a = g.b = g.c = x;
  g.m = -1;
  absl::Status s = this->blas().Gemm(g, this->stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("BlasApi::Gemm"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("negative"));
  g.m = 2;
  g.epilogue = Epilogue::kBiasRelu;
  s = this->blas().Gemm(g, this->stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("needs a bias"));
  g.epilogue = Epilogue::kRelu;
  g.bias = x;
  s = this->blas().Gemm(g, this->stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("a bias was given"));
  g.bias = nullptr;
  g.k = 0;
  s = this->blas().Gemm(g, this->stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("k = 0"));
  g.k = 2;
  g.a = nullptr;
  s = this->blas().Gemm(g, this->stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("a is null"));
  g.a = x;
  g.operands = static_cast<GemmOperands>(9);
  s = this->blas().Gemm(g, this->stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("operands 9 are not f32 or bf16"));
}

REGISTER_TYPED_TEST_SUITE_P(BlasApiContractTest, EveryTranspositionOfRectangularShapesIsExact,
                            Bf16OperandsAccumulateInF32, AlphaAndBetaAccumulate,
                            EpiloguesAddTheBiasPerColumnThenActivate, EmptyOutputIsANoOp,
                            RefusesBadArgumentsNamingThem);

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_BLAS_API_CONTRACT_TEST_H_

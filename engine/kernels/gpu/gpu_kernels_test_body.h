// One test body for GpuKernels, instantiated for the grid emulator on FakeCudaApi
// (emulated_kernels_test.cc, CPU CI) and for CudaKernels on RealCudaApi (cuda_kernels_test.cc,
// requires-gpu). Each kernel runs on device memory through the CudaApi and is compared with the
// engine's own CPU computation of the same thing: the op's CPU kernel from BuiltinOps(), or
// Optimizer::Apply. Bit for bit where the math is exact; softmax within kSoftmaxRelTolerance
// (expf's error and the block's order of the row sum) and a row sum of inexact values within
// kSumRelTolerance of the row's sum of magnitudes.
//
// A Backend type provides `static absl::StatusOr<GpuBackend> Make()`.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_TEST_BODY_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_TEST_BODY_H_

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/bfloat16.h"
#include "common/cuda/cuda_api.h"
#include "engine/kernels/gpu/gpu_kernels.h"
#include "engine/kernels/gpu/optimizer_params.h"
#include "engine/op_registry.h"
#include "engine/ops/builtin_ops.h"
#include "engine/optimizer.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine::gpu {

struct GpuBackend {
  std::unique_ptr<CudaApi> api;
  std::unique_ptr<GpuKernels> kernels;  // may borrow *api
};

inline constexpr float kSoftmaxRelTolerance = 1e-5f;
inline constexpr float kSumRelTolerance = 1e-5f;

inline std::vector<float> RandomFloats(size_t n, uint64_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Bitwise equality, naming the first element that differs.
inline ::testing::AssertionResult SameBits(const std::vector<float>& got,
                                           const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " elements, want " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " (bits differ), want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// The engine's CPU kernel of `node.op()` in f32, forward (and the gradient of input 0).
inline Tensor CpuForward(const v1::NodeDef& node, const std::vector<Tensor>& in) {
  static const OpRegistry* registry = new OpRegistry(BuiltinOps());
  absl::StatusOr<std::unique_ptr<OpKernel>> k =
      registry->CreateKernel(Device::Type::kCpu, node, DType::kF32);
  EXPECT_TRUE(k.ok()) << k.status();
  KernelContext ctx;
  ctx.allocate = [](DType d, const Shape& s) { return Tensor(d, s); };
  Tensor out;
  absl::Status s = (*k)->Forward(ctx, in, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

inline Tensor CpuGradient(const v1::NodeDef& node, const std::vector<Tensor>& in,
                          const Tensor& d_out) {
  static const OpRegistry* registry = new OpRegistry(BuiltinOps());
  std::unique_ptr<OpKernel> k = *registry->CreateKernel(Device::Type::kCpu, node, DType::kF32);
  KernelContext ctx;
  ctx.allocate = [](DType d, const Shape& s) { return Tensor(d, s); };
  Tensor out;
  EXPECT_TRUE(k->Forward(ctx, in, &out).ok());
  std::vector<Tensor> d_in(in.size());
  std::vector<bool> need(in.size(), false);
  need[0] = true;
  absl::Status s = k->Backward(ctx, in, out, d_out, need, &d_in);
  EXPECT_TRUE(s.ok()) << s;
  return d_in[0];
}

inline v1::NodeDef Node(v1::OpType op, std::vector<int64_t> axes = {}) {
  v1::NodeDef node;
  node.set_name("n");
  node.set_op(op);
  for (int64_t a : axes) node.add_axes(a);
  return node;
}

template <class Backend>
class GpuKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<GpuBackend> b = Backend::Make();
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
    absl::StatusOr<CudaStream> s = api().StreamCreate();
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = *s;
  }
  void TearDown() override {
    if (backend_.api == nullptr) return;
    EXPECT_TRUE(api().StreamSynchronize(stream_).ok());
    for (void* p : allocations_) EXPECT_TRUE(api().Free(p).ok());
    EXPECT_TRUE(api().StreamDestroy(stream_).ok());
    backend_.kernels.reset();
  }

  CudaApi& api() { return *backend_.api; }
  GpuKernels& kernels() { return *backend_.kernels; }

  // Device memory holding `host` (enqueued on the stream).
  float* ToDevice(const std::vector<float>& host) {
    absl::StatusOr<void*> p = api().Malloc(std::max<size_t>(host.size(), 1) * sizeof(float));
    EXPECT_TRUE(p.ok()) << p.status();
    allocations_.push_back(*p);
    // The stream reads `host` when it runs: keep a copy alive until then.
    staged_.push_back(host);
    EXPECT_TRUE(api()
                    .MemcpyAsync(*p, staged_.back().data(), host.size() * sizeof(float),
                                 CopyKind::kHostToDevice, stream_)
                    .ok());
    return static_cast<float*>(*p);
  }
  // Device memory holding `host` of any element type (enqueued; kept alive like ToDevice's).
  template <typename T>
  T* ToDeviceAs(const std::vector<T>& host) {
    const size_t bytes = host.size() * sizeof(T);
    absl::StatusOr<void*> p = api().Malloc(std::max<size_t>(bytes, 1));
    EXPECT_TRUE(p.ok()) << p.status();
    allocations_.push_back(*p);
    staged_bytes_.emplace_back(reinterpret_cast<const char*>(host.data()),
                               reinterpret_cast<const char*>(host.data()) + bytes);
    EXPECT_TRUE(
        api()
            .MemcpyAsync(*p, staged_bytes_.back().data(), bytes, CopyKind::kHostToDevice, stream_)
            .ok());
    return static_cast<T*>(*p);
  }
  // Synchronises the stream, then returns n values of type T at `d`.
  template <typename T>
  std::vector<T> ToHostAs(const T* d, size_t n) {
    std::vector<T> out(n);
    EXPECT_TRUE(
        api().MemcpyAsync(out.data(), d, n * sizeof(T), CopyKind::kDeviceToHost, stream_).ok());
    absl::Status s = api().StreamSynchronize(stream_);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  // Synchronises the stream, then returns n floats at `d`.
  std::vector<float> ToHost(const float* d, size_t n) {
    std::vector<float> out(n, std::nanf(""));
    EXPECT_TRUE(
        api().MemcpyAsync(out.data(), d, n * sizeof(float), CopyKind::kDeviceToHost, stream_).ok());
    absl::Status s = api().StreamSynchronize(stream_);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  GpuBackend backend_;
  CudaStream stream_ = nullptr;
  std::vector<void*> allocations_;
  std::deque<std::vector<float>> staged_;
  std::deque<std::vector<char>> staged_bytes_;
};

TYPED_TEST_SUITE_P(GpuKernelsTest);

// Axpy is SGD's update: Optimizer::Apply with SGD computes w -= lr * g.
TYPED_TEST_P(GpuKernelsTest, AxpyIsSgdBitForBit) {
  for (int64_t n : {1, 255, 4099}) {
    const std::vector<float> w0 = RandomFloats(n, 1), g = RandomFloats(n, 2);
    v1::OptimizerSpec spec;
    spec.mutable_sgd();
    spec.mutable_learning_rate()->mutable_constant()->set_value(0.0371);
    auto opt = *Optimizer::Create(spec, {VariableInfo{"w", Shape{n}, DType::kF32, true, 0}});
    std::vector<Tensor> w = {Tensor::FromVector(w0, Shape{n})};
    ASSERT_TRUE(opt->Apply({Tensor::FromVector(g, Shape{n})}, &w).ok());

    float* dw = this->ToDevice(w0);
    ASSERT_TRUE(this->kernels()
                    .Axpy(-static_cast<float>(0.0371), this->ToDevice(g), dw, n, this->stream_)
                    .ok());
    EXPECT_TRUE(SameBits(this->ToHost(dw, n), w[0].ToVector<float>())) << "n = " << n;
  }
}

// Scale is MEAN's gradient: the mean over 4 rows hands each row dy * (1/4).
TYPED_TEST_P(GpuKernelsTest, ScaleIsMeanGradientBitForBit) {
  const int64_t n = 1001;
  const std::vector<float> dy = RandomFloats(n, 3);
  Tensor gx =
      CpuGradient(Node(v1::MEAN, {0}), {Tensor::FromVector(RandomFloats(4 * n, 4), Shape{4, n})},
                  Tensor::FromVector(dy, Shape{n}));
  std::vector<float> want = gx.ToVector<float>();
  want.resize(n);
  float* y = this->ToDevice(std::vector<float>(n, 0.f));
  ASSERT_TRUE(this->kernels().Scale(this->ToDevice(dy), 0.25f, y, n, this->stream_).ok());
  EXPECT_TRUE(SameBits(this->ToHost(y, n), want));
}

TYPED_TEST_P(GpuKernelsTest, AddIsAddBitForBit) {
  const int64_t n = 3000;
  const std::vector<float> a = RandomFloats(n, 5), b = RandomFloats(n, 6);
  Tensor want =
      CpuForward(Node(v1::ADD), {Tensor::FromVector(a, Shape{n}), Tensor::FromVector(b, Shape{n})});
  float* y = this->ToDevice(std::vector<float>(n, 0.f));
  ASSERT_TRUE(this->kernels().Add(this->ToDevice(a), this->ToDevice(b), y, n, this->stream_).ok());
  EXPECT_TRUE(SameBits(this->ToHost(y, n), want.ToVector<float>()));
}

TYPED_TEST_P(GpuKernelsTest, ReluForwardAndGradientBitForBit) {
  const int64_t n = 2050;
  std::vector<float> x = RandomFloats(n, 7);
  x[0] = 0.f;
  x[1] = -0.f;
  x[2] = std::numeric_limits<float>::infinity();
  const std::vector<float> dy = RandomFloats(n, 8);
  const Tensor xt = Tensor::FromVector(x, Shape{n});
  Tensor want_y = CpuForward(Node(v1::RELU), {xt});
  Tensor want_dx = CpuGradient(Node(v1::RELU), {xt}, Tensor::FromVector(dy, Shape{n}));
  float* dx = this->ToDevice(x);
  float* y = this->ToDevice(std::vector<float>(n, 0.f));
  float* gx = this->ToDevice(std::vector<float>(n, 0.f));
  ASSERT_TRUE(this->kernels().Relu(dx, y, n, this->stream_).ok());
  ASSERT_TRUE(this->kernels().ReluGrad(dx, this->ToDevice(dy), gx, n, this->stream_).ok());
  EXPECT_TRUE(SameBits(this->ToHost(y, n), want_y.ToVector<float>()));
  EXPECT_TRUE(SameBits(this->ToHost(gx, n), want_dx.ToVector<float>()));
  // In place, as the executor may run it.
  ASSERT_TRUE(this->kernels().Relu(dx, dx, n, this->stream_).ok());
  EXPECT_TRUE(SameBits(this->ToHost(dx, n), want_y.ToVector<float>()));
}

TYPED_TEST_P(GpuKernelsTest, SoftmaxRowsMatchesSoftmaxWithinTolerance) {
  struct Case {
    int64_t rows, cols;
  };
  for (Case c : {Case{1, 1}, Case{5, 3}, Case{37, 1000}, Case{3, 4097}}) {
    const int64_t n = c.rows * c.cols;
    std::vector<float> x = RandomFloats(n, 9, -8.f, 8.f);
    Tensor want = CpuForward(Node(v1::SOFTMAX), {Tensor::FromVector(x, Shape{c.rows, c.cols})});
    float* y = this->ToDevice(std::vector<float>(n, 0.f));
    ASSERT_TRUE(
        this->kernels().SoftmaxRows(this->ToDevice(x), y, c.rows, c.cols, this->stream_).ok());
    const std::vector<float> got = this->ToHost(y, n);
    const float* w = want.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], w[i], kSoftmaxRelTolerance * w[i] + 1e-12f)
          << "element " << i << " of " << c.rows << " x " << c.cols;
    }
  }
}

TYPED_TEST_P(GpuKernelsTest, RowSumMatchesSum) {
  struct Case {
    int64_t rows, cols;
  };
  for (Case c : {Case{1, 1}, Case{4, 0}, Case{7, 33}, Case{19, 5000}}) {
    const int64_t n = c.rows * c.cols;
    // Small integers: every partial sum is exact, so any order gives the CPU's bits.
    std::vector<float> ints(n);
    for (int64_t i = 0; i < n; ++i) ints[i] = static_cast<float>((i * 7919) % 201 - 100);
    Tensor want = CpuForward(Node(v1::SUM, {1}), {Tensor::FromVector(ints, Shape{c.rows, c.cols})});
    float* y = this->ToDevice(std::vector<float>(c.rows, -1.f));
    ASSERT_TRUE(
        this->kernels().RowSum(this->ToDevice(ints), y, c.rows, c.cols, this->stream_).ok());
    EXPECT_TRUE(SameBits(this->ToHost(y, c.rows), want.ToVector<float>()))
        << c.rows << " x " << c.cols;
    // Inexact values: within rounding of the row's magnitude.
    const std::vector<float> x = RandomFloats(n, 10);
    Tensor want_x = CpuForward(Node(v1::SUM, {1}), {Tensor::FromVector(x, Shape{c.rows, c.cols})});
    ASSERT_TRUE(this->kernels().RowSum(this->ToDevice(x), y, c.rows, c.cols, this->stream_).ok());
    const std::vector<float> got = this->ToHost(y, c.rows);
    for (int64_t r = 0; r < c.rows; ++r) {
      float magnitude = 0;
      for (int64_t j = 0; j < c.cols; ++j) magnitude += std::fabs(x[r * c.cols + j]);
      EXPECT_NEAR(got[r], want_x.data<float>()[r], kSumRelTolerance * magnitude) << "row " << r;
    }
  }
}

// Several steps of Optimizer::Apply against the fused kernel, with and without weight decay
// and clipping (a clip norm below the gradients' norm, so every step clips).
inline v1::OptimizerSpec OptimizerSpecFor(const std::string& kind, bool decay_and_clip) {
  v1::OptimizerSpec spec;
  if (kind == "momentum") spec.mutable_momentum()->set_momentum(0.9);
  if (kind == "nesterov") {
    spec.mutable_momentum()->set_momentum(0.8);
    spec.mutable_momentum()->set_nesterov(true);
  }
  if (kind == "adam") spec.mutable_adam();
  spec.mutable_learning_rate()->mutable_constant()->set_value(0.0123);
  if (decay_and_clip) {
    spec.set_weight_decay(0.013);
    spec.set_global_clipnorm(0.5);
  }
  return spec;
}

TYPED_TEST_P(GpuKernelsTest, FusedOptimizersAreOptimizerApplyBitForBit) {
  const int64_t n = 1027;
  for (const std::string kind : {"momentum", "nesterov", "adam"}) {
    for (bool decay_and_clip : {false, true}) {
      SCOPED_TRACE(kind + (decay_and_clip ? " with decay and clipping" : ""));
      const v1::OptimizerSpec spec = OptimizerSpecFor(kind, decay_and_clip);
      auto opt = *Optimizer::Create(spec, {VariableInfo{"w", Shape{n}, DType::kF32, true, 0}});
      const std::vector<float> w0 = RandomFloats(n, 11);
      std::vector<Tensor> w = {Tensor::FromVector(w0, Shape{n})};
      float* dw = this->ToDevice(w0);
      float* slot0 = this->ToDevice(std::vector<float>(n, 0.f));
      float* slot1 = this->ToDevice(std::vector<float>(n, 0.f));
      for (int step = 0; step < 3; ++step) {
        const std::vector<float> g = RandomFloats(n, 100 + step);
        const int64_t t = opt->iterations() + 1;
        ASSERT_TRUE(opt->Apply({Tensor::FromVector(g, Shape{n})}, &w).ok());
        const double scale =
            decay_and_clip ? spec.global_clipnorm() / opt->last_gradient_norm() : 1.0;
        ASSERT_LT(scale, decay_and_clip ? 1.0 : 1.5);
        const double lr = spec.learning_rate().constant().value();
        float* dg = this->ToDevice(g);
        if (kind == "adam") {
          const auto& a = opt->slot_name(0);
          ASSERT_EQ(a, "w/adam_m");
          AdamParams p = MakeAdamParams(lr, 0.9, 0.999, 1e-7, t, spec.weight_decay(), scale);
          ASSERT_TRUE(this->kernels().Adam(p, dg, slot0, slot1, dw, n, this->stream_).ok());
        } else {
          MomentumParams p =
              MakeMomentumParams(lr, spec.momentum().momentum(), spec.momentum().nesterov(),
                                 spec.weight_decay(), scale);
          ASSERT_TRUE(this->kernels().Momentum(p, dg, slot0, dw, n, this->stream_).ok());
        }
        ASSERT_TRUE(SameBits(this->ToHost(dw, n), w[0].ToVector<float>())) << "step " << step;
        ASSERT_TRUE(SameBits(this->ToHost(slot0, n), opt->slot(0).ToVector<float>()))
            << "step " << step << ", " << opt->slot_name(0);
        if (kind == "adam") {
          ASSERT_TRUE(SameBits(this->ToHost(slot1, n), opt->slot(1).ToVector<float>()))
              << "step " << step << ", " << opt->slot_name(1);
        }
      }
    }
  }
}

// Global-norm clipping on the device: SumSquares per gradient, then ClipScale, against the
// host's norm (Optimizer::Apply on the CPU, which sums in f64 sequentially). The device sums
// the same exact f64 squares in a block tree, so the norms agree within kNormRelTolerance per
// element summed (each f64 sum of n non-negative terms is within (n - 1) * 2^-53 of the exact
// one; the sqrt halves it); the scale is (float)(c / norm), so it is the host's or one ulp off.
// The update kernels reading the scale from the device give the bits of the host-given scale.
TYPED_TEST_P(GpuKernelsTest, GlobalNormAndClipScaleMatchTheHostWithinTolerance) {
  constexpr double kNormRelTolerance = 0x1p-53;
  const std::vector<int64_t> sizes = {1, 1027, 20011};
  std::vector<std::vector<float>> grads;
  std::vector<VariableInfo> infos;
  int64_t total = 0;
  for (size_t v = 0; v < sizes.size(); ++v) {
    grads.push_back(RandomFloats(sizes[v], 300 + v, -3.f, 3.f));
    infos.push_back(VariableInfo{"w" + std::to_string(v), Shape{sizes[v]}, DType::kF32, true, 0});
    total += sizes[v];
  }
  // The host's norm: Optimizer::Apply with clipping on the CPU.
  v1::OptimizerSpec spec;
  spec.mutable_sgd();
  spec.mutable_learning_rate()->mutable_constant()->set_value(0.01);
  spec.set_global_clipnorm(1);
  auto opt = *Optimizer::Create(spec, infos);
  std::vector<Tensor> host_w, host_g;
  for (size_t v = 0; v < sizes.size(); ++v) {
    host_w.push_back(Tensor::Zeros(DType::kF32, Shape{sizes[v]}));
    host_g.push_back(Tensor::FromVector(grads[v], Shape{sizes[v]}));
  }
  ASSERT_TRUE(opt->Apply(host_g, &host_w).ok());
  const double host_norm = opt->last_gradient_norm();
  ASSERT_GT(host_norm, 10);

  const int64_t count = kNormPartials * static_cast<int64_t>(sizes.size());
  double* partials = this->ToDeviceAs(std::vector<double>(count, std::nan("")));
  for (size_t v = 0; v < sizes.size(); ++v) {
    float* g = this->ToDevice(grads[v]);
    ASSERT_TRUE(
        this->kernels().SumSquares(g, sizes[v], partials + v * kNormPartials, this->stream_).ok());
  }
  for (const double clipnorm : {host_norm / 3, host_norm * 2}) {
    SCOPED_TRACE(clipnorm < host_norm ? "clipping" : "within the bound");
    double* norm = this->ToDeviceAs(std::vector<double>{std::nan("")});
    float* scale = this->ToDevice({std::nanf("")});
    ASSERT_TRUE(
        this->kernels().ClipScale(partials, count, clipnorm, norm, scale, this->stream_).ok());
    const double got = this->ToHostAs(norm, 1)[0];
    EXPECT_NEAR(got, host_norm, kNormRelTolerance * total * host_norm);
    const float got_scale = this->ToHost(scale, 1)[0];
    if (clipnorm < host_norm) {
      const float want = static_cast<float>(clipnorm / host_norm);
      EXPECT_LE(std::fabs(got_scale - want), std::nextafter(want, 1.f) - want) << got_scale;
      EXPECT_NEAR(got_scale, 1.0 / 3, 1e-6);
    } else {
      EXPECT_EQ(got_scale, 1.f) << "a norm within the bound is not clipped";
    }
    // The update kernels read the device's scale: the bits of the same scale given by value.
    const int64_t n = sizes[1];
    const std::vector<float> w0 = RandomFloats(n, 7);
    float* g = this->ToDevice(grads[1]);
    float* v_dev = this->ToDevice(std::vector<float>(n, 0.f));
    float* w_dev = this->ToDevice(w0);
    float* v_host = this->ToDevice(std::vector<float>(n, 0.f));
    float* w_host = this->ToDevice(w0);
    const MomentumParams base = MakeMomentumParams(0.1, 0.9, false, 0.01, 1);
    ASSERT_TRUE(
        this->kernels()
            .Momentum(WithDeviceGradientScale(base, scale), g, v_dev, w_dev, n, this->stream_)
            .ok());
    MomentumParams by_value = base;
    by_value.scale_gradient = true;
    by_value.gradient_scale = got_scale;
    ASSERT_TRUE(this->kernels().Momentum(by_value, g, v_host, w_host, n, this->stream_).ok());
    EXPECT_TRUE(SameBits(this->ToHost(w_dev, n), this->ToHost(w_host, n)));
    float* y = this->ToDevice(std::vector<float>(n, 0.f));
    ASSERT_TRUE(this->kernels().ScaleByDevice(g, scale, y, n, this->stream_).ok());
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = grads[1][i] * got_scale;
    EXPECT_TRUE(SameBits(this->ToHost(y, n), want));
  }
  const absl::Status bad =
      this->kernels().ClipScale(partials, -1, 1.0, nullptr, nullptr, this->stream_);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("ClipScale"));
}

// The operands of BF16_MIXED products: the one bf16 rounding (common/bfloat16.h) bit for bit,
// ties to even, NaN kept a NaN, infinities and overflow, over a grid of several blocks.
TYPED_TEST_P(GpuKernelsTest, CastToBFloat16IsTheSharedRounding) {
  std::vector<float> x = RandomFloats(4099, 21, -300.f, 300.f);
  const float specials[] = {0.f,
                            -0.f,
                            1.00390625f,
                            1.01171875f,
                            3.4e38f,
                            -3.4e38f,
                            std::nanf(""),
                            INFINITY,
                            -INFINITY,
                            1e-40f,
                            FloatFromBits(0x7F800001u)};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  absl::StatusOr<void*> y = this->api().Malloc(x.size() * sizeof(uint16_t));
  ASSERT_TRUE(y.ok()) << y.status();
  this->allocations_.push_back(*y);
  ASSERT_TRUE(
      this->kernels()
          .CastToBFloat16(this->ToDevice(x), static_cast<uint16_t*>(*y), x.size(), this->stream_)
          .ok());
  std::vector<uint16_t> got(x.size(), 0xFFFF);
  ASSERT_TRUE(this->api()
                  .MemcpyAsync(got.data(), *y, got.size() * sizeof(uint16_t),
                               CopyKind::kDeviceToHost, this->stream_)
                  .ok());
  ASSERT_TRUE(this->api().StreamSynchronize(this->stream_).ok());
  int rounded = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(got[i], FloatToBFloat16(x[i])) << "element " << i << " = " << x[i];
    rounded += BFloat16ToFloat(got[i]) != x[i] && !std::isnan(x[i]);
  }
  EXPECT_GT(rounded, 4000);  // random values are not bf16 values: the cast rounded them
  absl::Status null = this->kernels().CastToBFloat16(nullptr, nullptr, 3, this->stream_);
  EXPECT_EQ(null.code(), absl::StatusCode::kInvalidArgument) << null;
  EXPECT_THAT(null.message(), ::testing::HasSubstr("CastToBFloat16"));
}

// BF16 compression's widening: every one of the 65536 bf16 bit patterns (zeros, subnormals,
// infinities, NaNs with their payloads) widened as the CPU widens them (common/bfloat16.h,
// which collectives' BFloat16ToFloats gives 8 at a time), bit for bit, over a grid of several
// blocks; and the narrowing then widening of f32 values is the CPU's round trip.
TYPED_TEST_P(GpuKernelsTest, CastFromBFloat16IsTheCpuWidening) {
  std::vector<uint16_t> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i);
  absl::StatusOr<void*> xd = this->api().Malloc(x.size() * sizeof(uint16_t));
  absl::StatusOr<void*> yd = this->api().Malloc(x.size() * sizeof(float));
  ASSERT_TRUE(xd.ok() && yd.ok());
  this->allocations_.push_back(*xd);
  this->allocations_.push_back(*yd);
  ASSERT_TRUE(this->api()
                  .MemcpyAsync(*xd, x.data(), x.size() * sizeof(uint16_t), CopyKind::kHostToDevice,
                               this->stream_)
                  .ok());
  ASSERT_TRUE(this->kernels()
                  .CastFromBFloat16(static_cast<const uint16_t*>(*xd), static_cast<float*>(*yd),
                                    x.size(), this->stream_)
                  .ok());
  const std::vector<float> got = this->ToHost(static_cast<float*>(*yd), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(FloatBits(got[i]), FloatBits(BFloat16ToFloat(x[i]))) << "bf16 bits " << x[i];
    ASSERT_EQ(FloatBits(got[i]), static_cast<uint32_t>(x[i]) << 16) << "bf16 bits " << x[i];
  }
  // Narrow then widen on the device: each value is its bf16 rounding (the compression's loss).
  const std::vector<float> v = RandomFloats(3001, 23, -50.f, 50.f);
  uint16_t* narrowed = static_cast<uint16_t*>(*xd);
  ASSERT_TRUE(
      this->kernels().CastToBFloat16(this->ToDevice(v), narrowed, v.size(), this->stream_).ok());
  ASSERT_TRUE(this->kernels()
                  .CastFromBFloat16(narrowed, static_cast<float*>(*yd), v.size(), this->stream_)
                  .ok());
  const std::vector<float> back = this->ToHost(static_cast<float*>(*yd), v.size());
  int changed = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(FloatBits(back[i]), FloatBits(RoundToBFloat16(v[i]))) << "element " << i;
    changed += back[i] != v[i];
  }
  EXPECT_GT(changed, 2900);  // the round trip is lossy for random values: the check can fail
  absl::Status null = this->kernels().CastFromBFloat16(nullptr, nullptr, 3, this->stream_);
  EXPECT_EQ(null.code(), absl::StatusCode::kInvalidArgument) << null;
  EXPECT_THAT(null.message(), ::testing::HasSubstr("CastFromBFloat16"));
}

TYPED_TEST_P(GpuKernelsTest, BadLaunchesAreRefusedByName) {
  float* d = this->ToDevice(std::vector<float>(4, 0.f));
  absl::Status negative = this->kernels().Relu(d, d, -1, this->stream_);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument) << negative;
  EXPECT_THAT(negative.message(), ::testing::HasSubstr("Relu"));
  absl::Status null = this->kernels().Axpy(1.f, nullptr, d, 4, this->stream_);
  EXPECT_EQ(null.code(), absl::StatusCode::kInvalidArgument) << null;
  EXPECT_THAT(null.message(), ::testing::HasSubstr("Axpy"));
  // Nothing to do is no launch and no error.
  EXPECT_TRUE(this->kernels().Scale(nullptr, 2.f, nullptr, 0, this->stream_).ok());
  EXPECT_TRUE(this->api().StreamSynchronize(this->stream_).ok());
}

// BIAS_ADD forward, and its bias gradient (the column sums, in the CPU's row order).
TYPED_TEST_P(GpuKernelsTest, BiasAddForwardAndGradientBitForBit) {
  struct Case {
    int64_t rows, cols;
  };
  int checked = 0;
  // 300 and 35 rows: whole batches of the bias gradient's loads and a remainder.
  for (Case c : {Case{1, 1}, Case{7, 3}, Case{300, 10}, Case{2, 1000}, Case{35, 17}}) {
    const int64_t n = c.rows * c.cols;
    const std::vector<float> x = RandomFloats(n, 20), b = RandomFloats(c.cols, 21);
    const std::vector<float> dy = RandomFloats(n, 22);
    const std::vector<Tensor> in = {Tensor::FromVector(x, Shape{c.rows, c.cols}),
                                    Tensor::FromVector(b, Shape{c.cols})};
    const Tensor want_y = CpuForward(Node(v1::BIAS_ADD), in);
    // The bias gradient is input 1: run the CPU kernel's backward for it.
    static const OpRegistry* registry = new OpRegistry(BuiltinOps());
    std::unique_ptr<OpKernel> k =
        *registry->CreateKernel(Device::Type::kCpu, Node(v1::BIAS_ADD), DType::kF32);
    KernelContext ctx;
    ctx.allocate = [](DType d, const Shape& s) { return Tensor(d, s); };
    std::vector<Tensor> d_in(2);
    ASSERT_TRUE(k->Backward(ctx, in, want_y, Tensor::FromVector(dy, Shape{c.rows, c.cols}),
                            {false, true}, &d_in)
                    .ok());
    float* y = this->ToDevice(std::vector<float>(n, 0.f));
    float* db = this->ToDevice(std::vector<float>(c.cols, 0.f));
    ASSERT_TRUE(this->kernels()
                    .BiasAdd(this->ToDevice(x), this->ToDevice(b), y, c.rows, c.cols, this->stream_)
                    .ok());
    ASSERT_TRUE(
        this->kernels().ColumnSum(this->ToDevice(dy), db, c.rows, c.cols, this->stream_).ok());
    EXPECT_TRUE(SameBits(this->ToHost(y, n), want_y.ToVector<float>())) << c.rows << "x" << c.cols;
    EXPECT_TRUE(SameBits(this->ToHost(db, c.cols), d_in[1].ToVector<float>()))
        << c.rows << "x" << c.cols;
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

// The loss (i32 and i64 labels, with and without label smoothing) within 1e-6 relative (exp
// and log in double, the rows summed in another grouping), its gradient within
// kSoftmaxRelTolerance (expf), and ACCURACY exactly.
TYPED_TEST_P(GpuKernelsTest, SoftmaxCrossEntropyAndAccuracyMatchTheCpuKernels) {
  int checked = 0;
  for (double eps : {0.0, 0.1}) {
    for (bool i64 : {false, true}) {
      const int64_t rows = 37, classes = 10;
      const std::vector<float> x = RandomFloats(rows * classes, 30, -5.f, 5.f);
      std::vector<int64_t> labels64(rows);
      std::vector<int32_t> labels32(rows);
      for (int64_t r = 0; r < rows; ++r) labels32[r] = labels64[r] = (r * 7) % classes;
      const Tensor xt = Tensor::FromVector(x, Shape{rows, classes});
      const Tensor lt = i64 ? Tensor::FromVector(labels64, Shape{rows})
                            : Tensor::FromVector(labels32, Shape{rows});
      v1::NodeDef node = Node(v1::SPARSE_SOFTMAX_CROSS_ENTROPY);
      node.set_label_smoothing(eps);
      const Tensor want_loss = CpuForward(node, {xt, lt});
      const Tensor want_grad = CpuGradient(node, {xt, lt}, Tensor::Scalar<float>(0.5f));
      const Tensor want_acc = CpuForward(Node(v1::ACCURACY), {xt, lt});

      float* dx = this->ToDevice(x);
      const void* dl = i64 ? static_cast<const void*>(this->ToDeviceAs(labels64))
                           : static_cast<const void*>(this->ToDeviceAs(labels32));
      double* terms = this->ToDeviceAs(std::vector<double>(rows, 0.0));
      float* loss = this->ToDevice({0.f});
      float* grad = this->ToDevice(std::vector<float>(rows * classes, 0.f));
      int32_t* hits = this->ToDeviceAs(std::vector<int32_t>(rows, 0));
      float* rate = this->ToDevice({0.f});
      ASSERT_TRUE(
          this->kernels()
              .SoftmaxCrossEntropy(dx, dl, i64, terms, loss, rows, classes, eps, this->stream_)
              .ok());
      ASSERT_TRUE(this->kernels()
                      .SoftmaxCrossEntropyGrad(dx, dl, i64, this->ToDevice({0.5f}), grad, rows,
                                               classes, static_cast<float>(eps), this->stream_)
                      .ok());
      ASSERT_TRUE(
          this->kernels().Accuracy(dx, dl, i64, hits, rate, rows, classes, this->stream_).ok());
      const float l = this->ToHost(loss, 1)[0], w = want_loss.data<float>()[0];
      EXPECT_NEAR(l, w, 1e-6 * std::fabs(w)) << "eps " << eps << " i64 " << i64;
      const std::vector<float> g = this->ToHost(grad, rows * classes);
      const float* wg = want_grad.data<float>();
      for (int64_t i = 0; i < rows * classes; ++i) {
        ASSERT_NEAR(g[i], wg[i], kSoftmaxRelTolerance * std::fabs(wg[i]) + 1e-9f)
            << "element " << i << " eps " << eps;
      }
      EXPECT_EQ(this->ToHost(rate, 1)[0], want_acc.data<float>()[0]);
      EXPECT_GT(want_acc.data<float>()[0], 0.f);  // some rows hit: the comparison can fail
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);
}

// CheckLabels writes 1 + the first row whose label is outside [0, classes) (0 when none),
// overwriting what the flag held; the loss kernels clamp such a label, so they read only the
// logits (the emulator fails a launch that reads outside its buffers) and still finish.
TYPED_TEST_P(GpuKernelsTest, CheckLabelsFlagsTheFirstBadRowAndTheLossKernelsClamp) {
  const int64_t rows = 4, classes = 10;
  const std::vector<float> x = RandomFloats(rows * classes, 31, -5.f, 5.f);
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {
      {{0, 1, 9, 3}, 0}, {{0, 1, 12, -1}, 3}, {{-1, 0, 0, 0}, 1}, {{0, 0, 0, 10}, 4}};
  for (bool i64 : {false, true}) {
    for (const auto& [labels, want] : cases) {
      const std::vector<int32_t> labels32(labels.begin(), labels.end());
      const void* dl = i64 ? static_cast<const void*>(this->ToDeviceAs(labels))
                           : static_cast<const void*>(this->ToDeviceAs(labels32));
      int64_t* bad = this->ToDeviceAs(std::vector<int64_t>{77});
      ASSERT_TRUE(this->kernels().CheckLabels(dl, i64, bad, rows, classes, this->stream_).ok());
      float* dx = this->ToDevice(x);
      double* terms = this->ToDeviceAs(std::vector<double>(rows, 0.0));
      float* loss = this->ToDevice({0.f});
      float* grad = this->ToDevice(std::vector<float>(rows * classes, 0.f));
      ASSERT_TRUE(
          this->kernels()
              .SoftmaxCrossEntropy(dx, dl, i64, terms, loss, rows, classes, 0.0, this->stream_)
              .ok());
      ASSERT_TRUE(this->kernels()
                      .SoftmaxCrossEntropyGrad(dx, dl, i64, this->ToDevice({1.f}), grad, rows,
                                               classes, 0.f, this->stream_)
                      .ok());
      EXPECT_TRUE(std::isfinite(this->ToHost(loss, 1)[0]));
      int64_t got = -1;
      ASSERT_TRUE(this->api()
                      .MemcpyAsync(&got, bad, sizeof(got), CopyKind::kDeviceToHost, this->stream_)
                      .ok());
      ASSERT_TRUE(this->api().StreamSynchronize(this->stream_).ok());
      EXPECT_EQ(got, want) << "i64 " << i64 << " labels " << labels[0] << "," << labels[1] << ","
                           << labels[2] << "," << labels[3];
    }
  }
  int64_t* bad = this->ToDeviceAs(std::vector<int64_t>{0});
  EXPECT_FALSE(this->kernels().CheckLabels(nullptr, true, bad, 4, classes, this->stream_).ok());
}

REGISTER_TYPED_TEST_SUITE_P(GpuKernelsTest, AxpyIsSgdBitForBit, ScaleIsMeanGradientBitForBit,
                            AddIsAddBitForBit, ReluForwardAndGradientBitForBit,
                            SoftmaxRowsMatchesSoftmaxWithinTolerance, RowSumMatchesSum,
                            FusedOptimizersAreOptimizerApplyBitForBit,
                            GlobalNormAndClipScaleMatchTheHostWithinTolerance,
                            CastToBFloat16IsTheSharedRounding, CastFromBFloat16IsTheCpuWidening,
                            BadLaunchesAreRefusedByName, BiasAddForwardAndGradientBitForBit,
                            SoftmaxCrossEntropyAndAccuracyMatchTheCpuKernels,
                            CheckLabelsFlagsTheFirstBadRowAndTheLossKernelsClamp);

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_TEST_BODY_H_

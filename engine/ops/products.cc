#include "engine/ops/products.h"

#include "absl/strings/str_cat.h"
#include "common/bfloat16.h"
#include "common/status.h"
#include "engine/kernels/cpu/blas.h"

namespace lockstep::engine {
namespace {

bool Bf16Operands(const KernelContext& ctx) { return ctx.precision == v1::Precision::BF16_MIXED; }

// n floats of `in`, each rounded to the nearest bf16, in f32 scratch from the context.
Tensor RoundedCopy(const KernelContext& ctx, const float* in, int64_t n) {
  Tensor out = ctx.allocate(DType::kF32, Shape{n});
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i) o[i] = RoundToBFloat16(in[i]);
  return out;
}

}  // namespace

template <>
void Product<float>(const KernelContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n,
                    int64_t k, float alpha, const float* a, const float* b, float beta, float* c) {
  if (!Bf16Operands(ctx) || m * n == 0) {
    cpu::Gemm<float>(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    return;
  }
  const Tensor ra = RoundedCopy(ctx, a, m * k), rb = RoundedCopy(ctx, b, k * n);
  cpu::Gemm<float>(trans_a, trans_b, m, n, k, alpha, ra.data<float>(), rb.data<float>(), beta, c);
}

template <>
void Product<double>(const KernelContext&, bool trans_a, bool trans_b, int64_t m, int64_t n,
                     int64_t k, double alpha, const double* a, const double* b, double beta,
                     double* c) {
  cpu::Gemm<double>(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

absl::Status GpuProduct(const KernelContext& ctx, const gpu::GpuDevice& gpu, gpu::GemmArgs g) {
  // A product over an empty inner dimension (a weights' gradient A^T dC of an empty batch, a
  // replica's empty share of a last partial batch) is zeros, as cpu::Gemm gives; BlasApi refuses
  // k = 0, so it is a memset on the stream here.
  if (g.k == 0 && g.m * g.n > 0 && g.beta == 0 && g.epilogue == gpu::Epilogue::kNone) {
    return gpu.context->Zero(g.c, static_cast<size_t>(g.m * g.n) * sizeof(float));
  }
  g.allow_tf32 = ctx.precision == v1::Precision::TF32;  // the job's choice, per call
  if (!Bf16Operands(ctx) || g.m * g.n == 0 || g.operands != gpu::GemmOperands::kF32) {
    return gpu.blas->Gemm(g, gpu.stream());
  }
  // The scratch goes back to the pool when this returns, before the product has run: the
  // pool is stream-ordered (a later user of the buffer is enqueued after the product).
  Tensor scratch[2];
  const void* operands[2] = {g.a, g.b};
  const int64_t sizes[2] = {g.m * g.k, g.k * g.n};
  for (int i = 0; i < 2; ++i) {
    scratch[i] = ctx.allocate(DType::kBF16, Shape{sizes[i]});
    if (!scratch[i].valid() || scratch[i].on_host()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no device memory for a BF16_MIXED product's bf16 operand of ", sizes[i], " elements"));
    }
    LS_RETURN_IF_ERROR(gpu.kernels->CastToBFloat16(static_cast<const float*>(operands[i]),
                                                   scratch[i].device_data<uint16_t>(), sizes[i],
                                                   gpu.stream()));
  }
  g.a = scratch[0].device_data<uint16_t>();
  g.b = scratch[1].device_data<uint16_t>();
  g.operands = gpu::GemmOperands::kBF16;
  return gpu.blas->Gemm(g, gpu.stream());
}

}  // namespace lockstep::engine

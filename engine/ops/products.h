// The matrix products of the GEMM-class ops (MATMUL, CONV2D's im2col product, SELF_ATTENTION's
// projections and per-head products; forward and gradient) in the graph's precision
// (KernelContext::precision, graph.proto's Precision), one function per device. The ops call
// these instead of cpu::Gemm or BlasApi::Gemm, so the precision is decided here, once.
//
// BF16_MIXED: both operands are rounded to bf16 (common/bfloat16.h: to nearest even) and the
// product accumulates in f32; C stays f32 (not rounded: the next product rounds its own
// operands, and the ops between keep f32). On the CPU the rounded values go into f32 scratch
// for cpu::Gemm: a product of two bf16 values is exact in f32, so this is exactly a bf16-input,
// f32-accumulate GEMM. On a GPU they are cast into bf16 device scratch
// (GpuKernels::CastToBFloat16) and multiplied by BlasApi with GemmOperands::kBF16 (cuBLASLt on
// tensor cores, or FakeBlasApi: the CPU's GEMM on the same values, so the fake "/gpu:0" gives the
// CPU's bits). Scratch comes from KernelContext::allocate (the executor's pool). F32 (and f64
// graphs, which cannot be BF16_MIXED: Graph::SetPrecision) multiply their operands as they are.
// Thread model: as the calling kernel.
#ifndef LOCKSTEP_ENGINE_OPS_PRODUCTS_H_
#define LOCKSTEP_ENGINE_OPS_PRODUCTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/gpu/gpu_device.h"
#include "engine/kernels/gpu/blas_api.h"
#include "engine/op_kernel.h"

namespace lockstep::engine {

// c [m, n] = alpha op(a) op(b) + beta c, row-major, cpu::Gemm's contract, on host memory.
template <typename T>
void Product(const KernelContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             T alpha, const T* a, const T* b, T beta, T* c);

// The product `g` (f32 operands, GemmOperands::kF32) enqueued on the device's stream.
// RESOURCE_EXHAUSTED when the bf16 scratch cannot be allocated; BlasApi's and the cast's errors.
absl::Status GpuProduct(const KernelContext& ctx, const gpu::GpuDevice& gpu, gpu::GemmArgs g);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OPS_PRODUCTS_H_

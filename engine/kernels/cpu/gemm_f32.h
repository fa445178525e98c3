// Single-precision GEMMs for the two products of a dense layer's backward pass, written so
// that the weight matrix is read where it lies and never packed (AVX2 + FMA, x86-64-v3 like
// the rest of the build). Row-major, contiguous operands, as cpu::Gemm's.
//
//   GemmTransA: C[m x n] = alpha * A^T * B + beta * C, A is [k x m], B is [k x n].
//     The weight gradient dW = X^T * dY: m and n are the layer's widths, k the batch. Both
//     operands are activations; they are packed (cost proportional to the batch) and every
//     6x16 tile of C is written once, with no separate pass that zeroes C for beta = 0.
//   GemmTransB: C[m x n] = alpha * A * B^T + beta * C, A is [m x k], B is [n x k].
//     The input gradient dX = dY * W^T: m is the batch, B the weight. Computed as C^T =
//     B * A^T: six rows of the weight are broadcast straight from memory against A^T, packed
//     in panels of 16 batch rows, and each tile is stored transposed.
//
// Why: OpenBLAS packs both operands of every call. For these two products that means a
// copy of the whole weight matrix per call and a memset of the whole weight gradient,
// costs that do not shrink with the batch, so a worker with half the batch pays them in
// full. The forward product keeps OpenBLAS: without packing the weight, its panels are
// reread from L2 at a 4 KiB stride and lost; packing it as GemmTransA packs its B was
// slower than OpenBLAS too. The measurements behind both choices: bench/kernel_tuning.md.
//
// Results are deterministic: each element is summed over k in one fixed order (in order
// within blocks of k, blocks in order). beta = 0 does not read C (NaN in C does not
// propagate), as BLAS specifies.
// Thread-safe: packing buffers are per thread. They grow with the product's width, not with
// k or the batch, which are packed a block at a time: GemmTransA keeps 512 x n floats,
// GemmTransB 256 x min(k, 1024) (2 MiB and 1 MiB for a 1024-wide layer).
#ifndef LOCKSTEP_ENGINE_KERNELS_CPU_GEMM_F32_H_
#define LOCKSTEP_ENGINE_KERNELS_CPU_GEMM_F32_H_

#include <cstdint>

namespace lockstep::engine::cpu {

void GemmTransA(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                float beta, float* c);
void GemmTransB(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                float beta, float* c);

}  // namespace lockstep::engine::cpu

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_GEMM_F32_H_

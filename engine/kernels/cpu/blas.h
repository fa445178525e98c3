// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C, for float and double, through CBLAS
// (Debian's OpenBLAS), except a float product with exactly one operand transposed (a dense
// layer's backward products) within the bounds of OwnKernelBoundsFor(BlasCoreName()), which
// runs our own single-threaded kernels (gemm_f32.h) while OpenBLAS has one thread. SetBlasThreads
// sets OpenBLAS's thread count, which is process-wide: the engine defaults to 1 (one replica thread
// = one BLAS thread).
#ifndef LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_
#define LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace lockstep::engine::cpu {

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c);

void SetBlasThreads(int threads);
int BlasThreads();
// The kernels OpenBLAS chose for this CPU ("Cooperlake", "Zen", "Haswell", ...), for
// benchmark headers: timings taken with different kernels do not compare.
std::string BlasCoreName();

// Which float products with one operand transposed (dW = X^T dY, dX = dY W^T) our kernels
// take instead of OpenBLAS: those of at least `min_work` multiply-adds with at most
// `max_batch` batch rows (k of dW, m of dX). The bounds were measured per OpenBLAS kernel set
// and CPU vendor (bench/kernel_tuning.md); `core` and `vendor` name where a row was measured
// ("" for any).
struct OwnKernelBounds {
  const char* core;
  const char* vendor;
  int64_t min_work;
  int64_t max_batch;
};
// The row for OpenBLAS kernel set `core_name` (as BlasCoreName() gives it, any case) on a CPU
// of `vendor` (CPUID's "GenuineIntel", "AuthenticAMD"), or the default row where none was
// measured.
const OwnKernelBounds& OwnKernelBoundsFor(absl::string_view core_name, absl::string_view vendor);
// The row Gemm uses in this process: this CPU's, decided once.
const OwnKernelBounds& OwnKernelBoundsHere();

}  // namespace lockstep::engine::cpu

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_

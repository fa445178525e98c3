// Row-major GEMM: C = alpha * op(A) * op(B) + beta * C, for float and double, through CBLAS
// (Debian's OpenBLAS), except a float product with exactly one operand transposed (a dense
// layer's backward products) of at least 2^18 multiply-adds, which runs our own
// single-threaded kernels (gemm_f32.h) while OpenBLAS has one thread. SetBlasThreads sets
// OpenBLAS's thread count, which is process-wide: the engine defaults to 1 (one replica thread =
// one BLAS thread).
#ifndef LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_
#define LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_

#include <cstdint>
#include <string>

namespace lockstep::engine::cpu {

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c);

void SetBlasThreads(int threads);
int BlasThreads();
// The kernels OpenBLAS chose for this CPU ("Cooperlake", "Zen", "Haswell", ...), for
// benchmark headers: timings taken with different kernels do not compare.
std::string BlasCoreName();

}  // namespace lockstep::engine::cpu

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_

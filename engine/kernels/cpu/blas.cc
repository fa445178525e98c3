#include "engine/kernels/cpu/blas.h"

#include <cblas.h>

#include "engine/kernels/cpu/gemm_f32.h"

namespace lockstep::engine::cpu {

// Below this many multiply-adds a product stays with OpenBLAS: it takes microseconds
// whichever code runs it, and the attention's per-head products (128 x 128 x 64) ran
// faster there (bench/kernel_tuning.md).
constexpr int64_t kOwnKernelMinWork = int64_t{1} << 21;

template <>
void Gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (trans_a != trans_b && m * n * k >= kOwnKernelMinWork && openblas_get_num_threads() == 1) {
    // A dense layer's two backward products: kernels that do not pack the weight
    // (gemm_f32.h says why). They run on the calling thread only, so with more BLAS
    // threads OpenBLAS keeps these products too.
    if (trans_a) {
      GemmTransA(m, n, k, alpha, a, b, beta, c);
    } else {
      GemmTransB(m, n, k, alpha, a, b, beta, c);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k, b,
              trans_b ? k : n, beta, c, n);
}

template <>
void Gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, const double* b, double beta, double* c) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k, b,
              trans_b ? k : n, beta, c, n);
}

// OpenBLAS (Debian's pthread build) starts a pool of one thread per core when the library
// loads. With one BLAS thread per replica those threads only get in the way (they slowed a
// training step and the shared-memory all-reduce: bench/kernel_tuning.md). So one thread
// means no pool; asking for more later starts it again.
extern "C" void blas_thread_shutdown_(void);

void SetBlasThreads(int threads) {
  if (threads <= 1) {
    blas_thread_shutdown_();
    openblas_set_num_threads(1);
    return;
  }
  openblas_set_num_threads(threads);
}

int BlasThreads() { return openblas_get_num_threads(); }

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "unknown" : name;
}

}  // namespace lockstep::engine::cpu

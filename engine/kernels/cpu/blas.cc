#include "engine/kernels/cpu/blas.h"

#include <cblas.h>

#include "engine/kernels/cpu/gemm_f32.h"

namespace lockstep::engine::cpu {

// Which backward products our kernels (gemm_f32.h) take; the rest stay with OpenBLAS. The
// measurements behind both bounds: bench/kernel_tuning.md.
//  - min_work: below this many multiply-adds a product takes microseconds whichever code
//    runs it, and the attention's per-head products (128 x 128 x 64) ran faster there.
//  - max_batch: the most batch rows (k of dW = X^T dY, m of dX = dY W^T) ours take. They
//    save the packing of the weight, a cost fixed per call; with more rows OpenBLAS's packed
//    kernels earn it back and ran faster (the Transformer's 1024 rows of a step).
struct OwnKernelBounds {
  int64_t min_work;
  int64_t max_batch;
};
constexpr OwnKernelBounds kOwnKernel = {int64_t{1} << 21, 255};

template <>
void Gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int64_t batch_rows = trans_a ? k : m;
  if (trans_a != trans_b && m * n * k >= kOwnKernel.min_work &&
      batch_rows <= kOwnKernel.max_batch && openblas_get_num_threads() == 1) {
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

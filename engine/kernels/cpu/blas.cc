#include "engine/kernels/cpu/blas.h"

#include <cblas.h>
#include <cpuid.h>

#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "engine/kernels/cpu/gemm_f32.h"

namespace lockstep::engine::cpu {
namespace {

// Which backward products our kernels (gemm_f32.h) take; the rest stay with OpenBLAS. Who
// wins depends on the kernels OpenBLAS chose (openblas_get_corename) and on the CPU running
// them (OpenBLAS's AVX-512 kernels beat ours on Intel's two 512-bit FMA units, not on AMD's),
// so the bounds are one row per (kernel set, CPU vendor) where they were measured, and the
// default row elsewhere. A table, not a calibration at start: the choice changes summation
// order, and a restarted worker must sum as it did before (bitwise restarts). The
// measurements behind each row: bench/kernel_tuning.md ("Backward GEMMs").
//  - min_work: below this many multiply-adds a product takes microseconds whichever code
//    runs it, and the attention's per-head products (128 x 128 x 64) ran faster there.
//  - max_batch: the most batch rows (k of dW = X^T dY, m of dX = dY W^T) ours take. They
//    save the packing of the weight, a cost fixed per call; with more rows OpenBLAS's packed
//    kernels earn it back (the Transformer's 1024 rows of a step on Zen). 0: never ours.
constexpr int64_t kMinWork = int64_t{1} << 21;
constexpr int64_t kAnyBatch = std::numeric_limits<int64_t>::max();
constexpr OwnKernelBounds kOwnKernelDefault = {"", "", kMinWork, 255};
constexpr OwnKernelBounds kOwnKernelTable[] = {
    // Ours win 1.1-1.15x at 128 and 256 rows; OpenBLAS from 512 on the Transformer's step.
    {"cooperlake", "AuthenticAMD", kMinWork, 255},
    {"zen", "AuthenticAMD", kMinWork, 255},
    // Intel: OpenBLAS's AVX2 and AVX-512 kernels win at every row count measured (128-1024).
    {"cooperlake", "GenuineIntel", kMinWork, 0},
    {"skylakex", "GenuineIntel", kMinWork, 0},
    {"haswell", "GenuineIntel", kMinWork, 0},
    {"zen", "GenuineIntel", kMinWork, 0},
    // OpenBLAS 0.3.21's fallback for CPUs it does not know (an AVX-512 Xeon with AVX-512 FP16,
    // for one): SSE3 kernels, which ours beat 1.8-2.4x at every row count.
    {"prescott", "", kMinWork, kAnyBatch},
};

// The CPU's vendor string from CPUID leaf 0 ("GenuineIntel", "AuthenticAMD"), "" elsewhere.
std::string CpuVendor() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return "";
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return vendor;
}

// Decided once per process: OpenBLAS picks its kernels when it loads.
const OwnKernelBounds& OwnKernel() {
  static const OwnKernelBounds& bounds = OwnKernelBoundsFor(BlasCoreName(), CpuVendor());
  return bounds;
}

}  // namespace

const OwnKernelBounds& OwnKernelBoundsFor(absl::string_view core_name, absl::string_view vendor) {
  for (const OwnKernelBounds& row : kOwnKernelTable) {
    if (absl::EqualsIgnoreCase(core_name, row.core) &&
        (row.vendor[0] == '\0' || vendor == row.vendor)) {
      return row;
    }
  }
  return kOwnKernelDefault;
}

const OwnKernelBounds& OwnKernelBoundsHere() { return OwnKernel(); }

template <>
void Gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int64_t batch_rows = trans_a ? k : m;
  const OwnKernelBounds& own = OwnKernel();
  if (trans_a != trans_b && m * n * k >= own.min_work && batch_rows <= own.max_batch &&
      openblas_get_num_threads() == 1) {
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

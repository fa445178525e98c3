// Row-major GEMM through CBLAS (Debian's OpenBLAS): C = alpha * op(A) * op(B) + beta * C,
// for float (sgemm) and double (dgemm). SetBlasThreads sets OpenBLAS's thread count, which
// is process-wide: the engine defaults to 1 (one replica thread = one BLAS thread).
//
// The engine opens OpenBLAS itself, at the first call, so that it can choose the library's
// kernels first (OPENBLAS_CORETYPE, read once when the library loads): on AMD Zen it asks
// for the Zen kernels, which are faster there than the AVX-512 ones OpenBLAS picks by
// itself on Zen 4 (measurements in blas.cc). A user's OPENBLAS_CORETYPE always wins.
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

// Opens OpenBLAS now. It sets OPENBLAS_CORETYPE for the moment of dlopen, so binaries call
// this from main before they start threads (any BLAS call does it otherwise). Aborts with a
// message naming the library when it cannot be loaded.
void LoadBlas();
// The kernels OpenBLAS runs ("Zen", "Haswell", "Cooperlake", ...), for logs.
std::string BlasCoreName();
// The core type the engine asked for ("ZEN"), or empty when it left OpenBLAS to choose.
std::string BlasCoreChosen();
// The OPENBLAS_CORETYPE the engine asks for on this CPU when the user set none ("ZEN" on
// AMD Zen), or nullptr to leave the choice to OpenBLAS.
const char* PreferredBlasCore();

}  // namespace lockstep::engine::cpu

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_BLAS_H_

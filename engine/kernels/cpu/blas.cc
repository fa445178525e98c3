#include "engine/kernels/cpu/blas.h"

#include <cblas.h>  // declarations only: the library is opened at run time
#include <cpuid.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace lockstep::engine::cpu {
namespace {

// The part of OpenBLAS the engine calls, resolved from the library it opens itself.
struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  decltype(&openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&openblas_get_num_threads) get_num_threads = nullptr;
  decltype(&openblas_get_corename) get_corename = nullptr;
  void (*thread_shutdown)() = nullptr;  // blas_thread_shutdown_: pthread builds only
  std::string core_chosen;              // what we set OPENBLAS_CORETYPE to, if we did
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "lockstep engine: %s\n", what.c_str());
  std::abort();
}

// OpenBLAS's runtime dispatch picks its AVX-512 "Cooperlake" kernels on AMD Zen 4 (it has
// AVX-512 BF16). Zen executes AVX-512 as two 256-bit halves, and the Zen kernels (AVX2,
// blocked for Zen's caches) are faster there. Measured on a 2-core AMD EPYC VM (OpenBLAS
// 0.3.21, one thread, the layer GEMMs of an MLP 784-1024-1024-10 forward and backward,
// median of 40-60 steps): batch 128 13.7 -> 12.5 ms, batch 256 25.8 -> 24.1 ms; the
// Haswell kernels came out like Zen, Skylake-X and Sapphire Rapids like Cooperlake. So on
// every AMD Zen (family 0x17 and later) the engine asks for the Zen kernels, unless the
// user set OPENBLAS_CORETYPE.
}  // namespace

const char* PreferredBlasCore() {
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return nullptr;
  char vendor[13];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  vendor[12] = '\0';
  if (std::strcmp(vendor, "AuthenticAMD") != 0) return nullptr;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return nullptr;
  unsigned family = (a >> 8) & 0xf;
  if (family == 0xf) family += (a >> 20) & 0xff;
  return family >= 0x17 ? "ZEN" : nullptr;
}

namespace {

template <typename F>
void Resolve(void* lib, const char* name, F* fn, bool required) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr && required) Die(std::string("OpenBLAS has no symbol ") + name);
}

// OpenBLAS reads OPENBLAS_CORETYPE once, in its load-time constructor, so the engine opens
// the library itself (not linked: a linked library's constructor runs before main). The
// variable is set only around dlopen and only when the user has not set it; the first BLAS
// call opens the library, and binaries call LoadBlas() from main before they start threads,
// so no other thread reads the environment meanwhile.
OpenBlas* Open() {
  auto* blas = new OpenBlas;
  // OpenBLAS, like us, takes an empty value for no value.
  const char* user = getenv("OPENBLAS_CORETYPE");
  const bool user_chose = user != nullptr && *user != '\0';
  const bool was_set = user != nullptr;
  const char* preferred = user_chose ? nullptr : PreferredBlasCore();
  if (preferred != nullptr) {
    setenv("OPENBLAS_CORETYPE", preferred, 1);
    blas->core_chosen = preferred;
  }
  // Debian's alternatives pick the build (pthread, openmp or serial) behind this name.
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (preferred != nullptr) {  // leave the environment as we found it
    if (was_set) {
      setenv("OPENBLAS_CORETYPE", "", 1);
    } else {
      unsetenv("OPENBLAS_CORETYPE");
    }
  }
  if (lib == nullptr) {
    Die(std::string("cannot load OpenBLAS (libopenblas.so.0; Debian package libopenblas0, "
                    "installed by tools/bootstrap.sh): ") +
        dlerror());
  }
  Resolve(lib, "cblas_sgemm", &blas->sgemm, true);
  Resolve(lib, "cblas_dgemm", &blas->dgemm, true);
  Resolve(lib, "openblas_set_num_threads", &blas->set_num_threads, true);
  Resolve(lib, "openblas_get_num_threads", &blas->get_num_threads, true);
  Resolve(lib, "openblas_get_corename", &blas->get_corename, true);
  Resolve(lib, "blas_thread_shutdown_", &blas->thread_shutdown, false);
  return blas;
}

const OpenBlas& Blas() {
  static const OpenBlas* blas = Open();  // thread-safe, once
  return *blas;
}

}  // namespace

void LoadBlas() { Blas(); }

std::string BlasCoreName() {
  const char* name = Blas().get_corename();
  return name == nullptr ? "unknown" : name;
}

std::string BlasCoreChosen() { return Blas().core_chosen; }

template <>
void Gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  Blas().sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
               trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k, b,
               trans_b ? k : n, beta, c, n);
}

template <>
void Gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, const double* b, double beta, double* c) {
  if (m == 0 || n == 0) return;
  Blas().dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
               trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k, b,
               trans_b ? k : n, beta, c, n);
}

// OpenBLAS (Debian's pthread build) starts a pool of one thread per core when the library
// loads. With one BLAS thread per replica those threads only get in the way: on these
// 2-core machines their presence cost a 1-worker training step 1.125x -> 1.063x of the bare
// engine step, and the all-reduce benchmark ~1.8x at 256 KiB..1 MiB over shm. So one thread
// means no pool; asking for more later starts it again.
void SetBlasThreads(int threads) {
  const OpenBlas& blas = Blas();
  if (threads <= 1) {
    if (blas.thread_shutdown != nullptr) blas.thread_shutdown();
    blas.set_num_threads(1);
    return;
  }
  blas.set_num_threads(threads);
}

int BlasThreads() { return Blas().get_num_threads(); }

}  // namespace lockstep::engine::cpu

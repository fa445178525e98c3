// bench/gemm_bf16: does bf16 compute pay on this CPU? For the products of the models we train
// (the digits MLP and the char Transformer of examples/jobs/, bench/train_step's MLP, and
// small-batch shapes of that MLP, the memory-bound candidates), C[m x n] = A[m x k] B[k x n]
// row-major, one thread, timed four ways, interleaved call by call:
//   sgemm     OpenBLAS cblas_sgemm on f32 operands (what cpu::Gemm runs for untransposed ones);
//   f32       this file's blocked GEMM on f32 operands (6x16 AVX2/FMA micro-kernel), the peer
//             that tells the bf16 variants' costs from this kernel's own quality;
//   bf16 pk   the same GEMM on bf16 operands, widened to f32 (a 16-bit zero-extend and a
//             shift) while packing A and B into the micro-kernel's f32 panels;
//   bf16 in   bf16 operands, A widened while packing, B read as bf16 straight from its rows
//             and widened inside the micro-kernel's loop (no B packing: half the bytes of B
//             read per use, an extra two instructions per 8 elements).
// All accumulate in f32 with FMA. Also timed: rounding both operands f32 -> bf16
// (collectives::FloatsToBFloat16, what a mixed-precision mode keeping f32 master weights pays
// every step). The results are checked against sgemm of the rounded operands.
// Last, the kernels of bf16 gradient compression (communication.compression) on 1 M floats:
// rounding, widening, and the bf16 SUM reduction against the f32 one (collectives/reduce.h).
//   bazel run //bench:gemm_bf16
//   bazel run //bench:gemm_bf16 -- --rounds=31 --min_ms=2
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "collectives/reduce.h"
#include "engine/kernels/cpu/blas.h"

ABSL_FLAG(int, rounds, 21, "interleaved rounds per shape (the median is reported)");
ABSL_FLAG(double, min_ms, 1.0, "each timing repeats the call until this many ms have passed");
ABSL_FLAG(bool, gemm, true, "time the products (false: only the gradient kernels)");

namespace {

using lockstep::collectives::BFloat16ToFloat;
using lockstep::collectives::BFloat16ToFloats;
using lockstep::collectives::FloatsToBFloat16;

// Blocking (GotoBLAS): a kc x nc block of B (f32: 256 KiB, half the 512 KiB L2 of a Zen 3
// core) and an mc x kc block of A (96 KiB) per micro-kernel sweep.
constexpr int kMr = 6, kNr = 16;
constexpr int kKc = 256, kMc = 96, kNc = 256;

inline __m256 Widen8(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) { return Widen8(p); }
inline float ToFloat(float v) { return v; }
inline float ToFloat(uint16_t v) { return BFloat16ToFloat(v); }

// C[6 x 16] (+)= Ap[kc x 6] Bp[kc x 16], Bp's rows ldb apart (16 when packed). Rows past
// `mr` and columns past `nr` are computed on padding and not stored.
template <typename TB>
void Kernel(int kc, const float* ap, const TB* bp, int ldb, float* c, int ldc, int mr, int nr,
            bool accumulate) {
  // Twelve named accumulators: as an array GCC stores them to the stack every iteration
  // (the edge path below takes their address), which halved the kernel's speed.
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int k = 0; k < kc; ++k) {
    const __m256 b0 = Load8(bp + k * ldb), b1 = Load8(bp + k * ldb + 8);
    const float* a = ap + k * kMr;
    __m256 ar = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(ar, b0, c00);
    c01 = _mm256_fmadd_ps(ar, b1, c01);
    ar = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ar, b0, c10);
    c11 = _mm256_fmadd_ps(ar, b1, c11);
    ar = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ar, b0, c20);
    c21 = _mm256_fmadd_ps(ar, b1, c21);
    ar = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ar, b0, c30);
    c31 = _mm256_fmadd_ps(ar, b1, c31);
    ar = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ar, b0, c40);
    c41 = _mm256_fmadd_ps(ar, b1, c41);
    ar = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ar, b0, c50);
    c51 = _mm256_fmadd_ps(ar, b1, c51);
  }
  __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMr && nr == kNr) {
    for (int r = 0; r < kMr; ++r) {
      float* row = c + r * ldc;
      if (accumulate) {
        acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_loadu_ps(row));
        acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_loadu_ps(row + 8));
      }
      _mm256_storeu_ps(row, acc[r][0]);
      _mm256_storeu_ps(row + 8, acc[r][1]);
    }
    return;
  }
  alignas(32) float tile[kMr][kNr];
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_ps(tile[r], acc[r][0]);
    _mm256_store_ps(tile[r] + 8, acc[r][1]);
  }
  for (int r = 0; r < mr; ++r) {
    for (int j = 0; j < nr; ++j) c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0) + tile[r][j];
  }
}

// Scratch for the packed panels, kept between calls (as OpenBLAS keeps its buffers).
struct Workspace {
  std::vector<float> a = std::vector<float>(kMc * kKc + 64);
  std::vector<float> b = std::vector<float>(kKc * kNc + 64);
  std::vector<float> aw = std::vector<float>(kMc * kKc);          // bf16 A's rows, widened
  std::vector<uint16_t> edge = std::vector<uint16_t>(kKc * kNr);  // bf16 columns past n
};

// How B reaches the micro-kernel: packed into f32 panels (widened there when bf16), or, for
// bf16 B, read from its rows and widened in the kernel's loop.
enum class BPath { kPacked, kInLoop };

template <typename T>
void Gemm(int m, int n, int k, const T* a, const T* b, float* c, BPath path, Workspace& ws) {
  for (int jc = 0; jc < n; jc += kNc) {
    const int nc = std::min(kNc, n - jc);
    for (int pc = 0; pc < k; pc += kKc) {
      const int kc = std::min(kKc, k - pc);
      const bool accumulate = pc > 0;
      if (path == BPath::kPacked) {  // panels of kc x 16, zero-padded past n
        for (int jp = 0; jp < nc; jp += kNr) {
          float* panel = ws.b.data() + jp * kc;
          const int nr = std::min(kNr, nc - jp);
          for (int p = 0; p < kc; ++p) {
            const T* src = b + static_cast<size_t>(pc + p) * n + jc + jp;
            float* dst = panel + p * kNr;
            if (nr == kNr) {
              _mm256_storeu_ps(dst, Load8(src));
              _mm256_storeu_ps(dst + 8, Load8(src + 8));
            } else {
              for (int j = 0; j < kNr; ++j) dst[j] = j < nr ? ToFloat(src[j]) : 0.0f;
            }
          }
        }
      }
      for (int ic = 0; ic < m; ic += kMc) {
        const int mc = std::min(kMc, m - ic);
        // bf16 A: the block's rows are first widened 8 at a time into f32 rows (the packing
        // below interleaves 6 rows, which a scalar widening per element made 2x slower).
        const float* a_rows = nullptr;
        int lda = k;
        if constexpr (std::is_same_v<T, uint16_t>) {
          for (int r = 0; r < mc; ++r) {
            BFloat16ToFloats(a + static_cast<size_t>(ic + r) * k + pc, ws.aw.data() + r * kc, kc);
          }
          a_rows = ws.aw.data();
          lda = kc;
        } else {
          a_rows = a + static_cast<size_t>(ic) * k + pc;
        }
        for (int ip = 0; ip < mc; ip += kMr) {  // A panels of kc x 6, zero-padded past m
          float* panel = ws.a.data() + ip * kc;
          const int mr = std::min(kMr, mc - ip);
          for (int r = 0; r < kMr; ++r) {
            if (r >= mr) {
              for (int p = 0; p < kc; ++p) panel[p * kMr + r] = 0.0f;
              continue;
            }
            const float* src = a_rows + static_cast<size_t>(ip + r) * lda;
            for (int p = 0; p < kc; ++p) panel[p * kMr + r] = src[p];
          }
        }
        for (int jp = 0; jp < nc; jp += kNr) {
          const int nr = std::min(kNr, nc - jp);
          for (int ip = 0; ip < mc; ip += kMr) {
            float* cp = c + static_cast<size_t>(ic + ip) * n + jc + jp;
            const float* ap = ws.a.data() + ip * kc;
            const int mr = std::min(kMr, mc - ip);
            if (path == BPath::kPacked) {
              Kernel(kc, ap, ws.b.data() + jp * kc, kNr, cp, n, mr, nr, accumulate);
            } else if constexpr (std::is_same_v<T, uint16_t>) {
              const uint16_t* bp = b + static_cast<size_t>(pc) * n + jc + jp;
              int ldb = n;
              if (nr < kNr) {  // the last columns: a zero-padded copy, never read past n
                for (int p = 0; p < kc; ++p) {
                  for (int j = 0; j < kNr; ++j) ws.edge[p * kNr + j] = j < nr ? bp[p * n + j] : 0;
                }
                bp = ws.edge.data();
                ldb = kNr;
              }
              Kernel(kc, ap, bp, ldb, cp, n, mr, nr, accumulate);
            }
          }
        }
      }
    }
  }
}

struct Shape {
  const char* model;
  const char* what;
  int m, k, n;
};

// The products of a training step, as C[m x n] = A[m x k] B[k x n] (the backward products'
// transposes are taken as stored: a bf16 mode would pack them the same way).
const Shape kShapes[] = {
    // examples/jobs/digits_mlp.json: 64-128-10, global batch 48 over 2 workers: 24 rows.
    {"digits MLP", "hidden fwd", 24, 64, 128},
    {"digits MLP", "logits fwd", 24, 128, 10},
    {"digits MLP", "hidden dW", 64, 24, 128},
    {"digits MLP", "logits dX", 24, 10, 128},
    // examples/jobs/char_transformer.json: width 64, sequence 64, global batch 32 over 2
    // workers: 1024 rows; 2 heads of 32.
    {"char Transformer", "qkv fwd", 1024, 64, 192},
    {"char Transformer", "ff1 fwd", 1024, 64, 128},
    {"char Transformer", "ff2 fwd", 1024, 128, 64},
    {"char Transformer", "logits fwd", 1024, 64, 96},
    {"char Transformer", "qkv dW", 64, 1024, 192},
    {"char Transformer", "ff2 dX", 1024, 64, 128},
    {"char Transformer", "scores (1 head)", 64, 32, 64},
    // bench/train_step's MLP 784-1024-1024-10 at a worker's 128 rows, and at small batches,
    // where the weights' bytes dominate (the memory-bound candidates).
    {"MLP 784-1024-1024", "dense2 fwd b128", 128, 1024, 1024},
    {"MLP 784-1024-1024", "dense1 dW b128", 784, 128, 1024},
    {"MLP 784-1024-1024", "dense2 fwd b16", 16, 1024, 1024},
    {"MLP 784-1024-1024", "dense2 fwd b6", 6, 1024, 1024},
    {"MLP 784-1024-1024", "dense2 fwd b1", 1, 1024, 1024},
};

std::vector<float> Filled(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<float>(static_cast<int>(seed >> 9) % 2001 - 1000) * 1e-3f;
  }
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per call of fn, repeated for at least min_ms.
template <typename F>
double TimeUs(F&& fn, double min_ms) {
  int calls = 0;
  const absl::Time t0 = absl::Now();
  absl::Duration spent;
  do {
    fn();
    ++calls;
    spent = absl::Now() - t0;
  } while (absl::ToDoubleMilliseconds(spent) < min_ms);
  return absl::ToDoubleMicroseconds(spent) / calls;
}

void RunShape(const Shape& s, int rounds, double min_ms, Workspace& ws) {
  const std::vector<float> a = Filled(static_cast<size_t>(s.m) * s.k, 1);
  const std::vector<float> b = Filled(static_cast<size_t>(s.k) * s.n, 2);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  FloatsToBFloat16(a.data(), a16.data(), a.size());
  FloatsToBFloat16(b.data(), b16.data(), b.size());
  std::vector<float> c(static_cast<size_t>(s.m) * s.n), want(c.size());

  // Check: each bf16 variant against sgemm of the widened bf16 operands.
  std::vector<float> aw(a.size()), bw(b.size());
  for (size_t i = 0; i < a.size(); ++i) aw[i] = BFloat16ToFloat(a16[i]);
  for (size_t i = 0; i < b.size(); ++i) bw[i] = BFloat16ToFloat(b16[i]);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1, aw.data(), s.k,
              bw.data(), s.n, 0, want.data(), s.n);
  // Normwise: the largest difference over the largest result (sums of k products in another
  // order differ by a few f32 ulps of the terms, not of a result that cancels to near 0).
  auto error = [&] {
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < c.size(); ++i) {
      diff = std::max<double>(diff, std::fabs(c[i] - want[i]));
      scale = std::max<double>(scale, std::fabs(want[i]));
    }
    return diff / scale;
  };
  double worst = 0;
  for (BPath path : {BPath::kPacked, BPath::kInLoop}) {
    Gemm(s.m, s.n, s.k, a16.data(), b16.data(), c.data(), path, ws);
    worst = std::max(worst, error());
  }
  Gemm(s.m, s.n, s.k, a.data(), b.data(), c.data(), BPath::kPacked, ws);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1, a.data(), s.k, b.data(),
              s.n, 0, want.data(), s.n);
  worst = std::max(worst, error());
  if (worst > 1e-5) {
    std::fprintf(stderr, "%s %s: results differ from sgemm (relative %g)\n", s.model, s.what,
                 worst);
    std::exit(1);
  }

  std::vector<double> t[5];  // sgemm, f32, bf16 packed, bf16 in loop, rounding
  for (int r = 0; r < rounds; ++r) {
    t[0].push_back(TimeUs(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1, a.data(), s.k,
                      b.data(), s.n, 0, c.data(), s.n);
        },
        min_ms));
    t[1].push_back(TimeUs(
        [&] { Gemm(s.m, s.n, s.k, a.data(), b.data(), c.data(), BPath::kPacked, ws); }, min_ms));
    t[2].push_back(
        TimeUs([&] { Gemm(s.m, s.n, s.k, a16.data(), b16.data(), c.data(), BPath::kPacked, ws); },
               min_ms));
    t[3].push_back(
        TimeUs([&] { Gemm(s.m, s.n, s.k, a16.data(), b16.data(), c.data(), BPath::kInLoop, ws); },
               min_ms));
    t[4].push_back(TimeUs(
        [&] {
          FloatsToBFloat16(a.data(), a16.data(), a.size());
          FloatsToBFloat16(b.data(), b16.data(), b.size());
        },
        min_ms));
  }
  double m[5];
  for (int i = 0; i < 5; ++i) m[i] = Median(t[i]);
  const double best16 = std::min(m[2], m[3]);
  const double gflops = 2.0 * s.m * s.n * s.k / (m[0] * 1e3);
  std::printf(
      "%-18s %-16s %5d %5d %5d  %9.2f %9.2f %9.2f %9.2f %9.2f  %6.2f  %7.3fx %7.3fx %7.3fx\n",
      s.model, s.what, s.m, s.k, s.n, m[0], m[1], m[2], m[3], m[4], gflops, m[0] / best16,
      m[0] / (best16 + m[4]), m[1] / best16);
}

// The passes bf16 gradient compression adds, and the reduction it changes, on 1 M elements.
void RunGradientKernels(int rounds, double min_ms) {
  using lockstep::DType;
  using lockstep::collectives::Reduce;
  using lockstep::collectives::ReduceOp;
  const size_t n = size_t{1} << 20;
  std::vector<float> a = Filled(n, 3), b = Filled(n, 4), w(n);
  std::vector<uint16_t> a16(n), b16(n);
  FloatsToBFloat16(a.data(), a16.data(), n);
  FloatsToBFloat16(b.data(), b16.data(), n);
  std::vector<double> t[4];
  for (int r = 0; r < rounds; ++r) {
    t[0].push_back(TimeUs([&] { FloatsToBFloat16(a.data(), b16.data(), n); }, min_ms));
    t[1].push_back(TimeUs([&] { BFloat16ToFloats(a16.data(), w.data(), n); }, min_ms));
    t[2].push_back(
        TimeUs([&] { Reduce(DType::kF32, ReduceOp::kSum, w.data(), b.data(), n); }, min_ms));
    t[3].push_back(
        TimeUs([&] { Reduce(DType::kBF16, ReduceOp::kSum, a16.data(), b16.data(), n); }, min_ms));
  }
  std::printf(
      "gradient kernels, 1 M elements, us (median of %d rounds): round f32->bf16 %.1f, widen "
      "bf16->f32 %.1f, SUM f32 %.1f, SUM bf16 %.1f\n",
      rounds, Median(t[0]), Median(t[1]), Median(t[2]), Median(t[3]));
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  lockstep::engine::cpu::SetBlasThreads(1);
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  std::printf(
      "gemm_bf16: C[m x n] = A[m x k] B[k x n], 1 thread, OpenBLAS %s kernels; microseconds per "
      "call, median of %d interleaved rounds (each >= %.1f ms of calls)\n"
      "  sgemm: OpenBLAS f32; f32: this GEMM on f32; bf16 pk: bf16 operands widened while "
      "packing; bf16 in: B widened in the kernel's loop; round: A and B f32 -> bf16\n"
      "  gain = sgemm / best bf16 (>1: bf16 faster); +round: with the rounding; vs f32: this "
      "GEMM's f32 / best bf16\n",
      lockstep::engine::cpu::BlasCoreName().c_str(), rounds, absl::GetFlag(FLAGS_min_ms));
  std::printf("%-18s %-16s %5s %5s %5s  %9s %9s %9s %9s %9s  %6s  %8s %8s %8s\n", "model",
              "product", "m", "k", "n", "sgemm", "f32", "bf16 pk", "bf16 in", "round", "GF/s",
              "gain", "+round", "vs f32");
  Workspace ws;
  if (absl::GetFlag(FLAGS_gemm)) {
    for (const Shape& s : kShapes) RunShape(s, rounds, absl::GetFlag(FLAGS_min_ms), ws);
  }
  RunGradientKernels(rounds, absl::GetFlag(FLAGS_min_ms));
  return 0;
}

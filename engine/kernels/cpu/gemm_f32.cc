#include "engine/kernels/cpu/gemm_f32.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

namespace lockstep::engine::cpu {
namespace {

constexpr int64_t kRows = 6;   // broadcast operand: rows of the micro-tile
constexpr int64_t kCols = 16;  // vector operand: two 8-float registers

// GemmTransA: tiles of A (6 columns each) per block; 16 tiles = 96 columns of A times the
// batch stay in L2 while every panel of B passes through L1 (measured: 16 against 8, 32 and
// unblocked at batch 128 and 256).
constexpr int64_t kTransATilesPerBlock = 16;
// ... and k (the batch for dW) in blocks of 512: a dense layer's batch is one block; longer
// products (a convolution's dW, k = batch x output pixels) pack a bounded slice at a time.
constexpr int64_t kTransABlockK = 512;
// GemmTransB: the weight is read in blocks of 48 rows (8 tiles of 6) by up to 1024 columns,
// 192 KiB that stay in L2 while every panel of the batch passes (measured against 24 and 96
// rows and against 256, 512 and 768 columns, batch 128 and 256).
constexpr int64_t kTransBRowsPerBlock = 48;
constexpr int64_t kTransBBlockK = 1024;
// ... and A (the batch) in blocks of 16 panels, 256 rows: a dense layer's batch is one or two
// blocks; taller products (a convolution's dX) pack a bounded slice at a time.
constexpr int64_t kTransBPanelsPerBlock = 16;

// Lanes [0, r) of a mask for _mm256_mask{load,store}_ps, r in [0, 8].
__m256i LaneMask(int64_t r) {
  alignas(32) static const int32_t kBits[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 8 - r));
}

// acc[x] = sum over p < kc of a[x][p * kAStep] * b[p * 16, p * 16 + 16), then store(acc):
// the 6x16 micro-kernel, 12 accumulators. `b` is a packed panel: 16 floats per p. `store`
// is inlined and must index acc with constants only (unrolled loops), so the accumulators
// never leave their registers.
template <int64_t kAStep, typename Store>
__attribute__((always_inline)) inline void MicroKernel(int64_t kc, const float* const a[kRows],
                                                       const float* b, Store&& store) {
  __m256 acc[kRows][2];
#pragma GCC unroll 6
  for (int x = 0; x < kRows; ++x) acc[x][0] = acc[x][1] = _mm256_setzero_ps();
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (int64_t p = 0; p < kc; ++p, b += kCols) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    const float* row[kRows] = {a0, a1, a2, a3, a4, a5};
#pragma GCC unroll 6
    for (int x = 0; x < kRows; ++x) {
      const __m256 s = _mm256_broadcast_ss(row[x] + p * kAStep);
      acc[x][0] = _mm256_fmadd_ps(s, b0, acc[x][0]);
      acc[x][1] = _mm256_fmadd_ps(s, b1, acc[x][1]);
    }
  }
  store(acc);
}

// C = beta * C for a product with k = 0 (beta = 0 writes zeros, never reading C).
void ScaleC(int64_t count, float beta, float* c) {
  for (int64_t i = 0; i < count; ++i) c[i] = beta == 0 ? 0.0f : beta * c[i];
}

// Packs columns [0, n) of the [k x ld] matrix `src` into ceil(n / 16) panels of k rows of
// 16 floats (panel jp at dst + jp * 16 * k), zero-filling past n. Row by row: each source
// row is read once, in order, which the prefetcher follows (panel by panel, every 64-byte
// read would start a new row, a 4 KiB stride for a 1024-wide matrix).
void PackPanels(const float* src, int64_t ld, int64_t k, int64_t n, float* dst) {
  const int64_t full = n / kCols, rest = n - full * kCols;
  const __m256i m0 = LaneMask(std::min<int64_t>(rest, 8));
  const __m256i m1 = LaneMask(std::max<int64_t>(rest - 8, 0));
  for (int64_t p = 0; p < k; ++p, src += ld) {
    float* out = dst + p * kCols;
    for (int64_t jp = 0; jp < full; ++jp, out += kCols * k) {
      _mm256_storeu_ps(out, _mm256_loadu_ps(src + jp * kCols));
      _mm256_storeu_ps(out + 8, _mm256_loadu_ps(src + jp * kCols + 8));
    }
    if (rest > 0) {
      _mm256_storeu_ps(out, _mm256_maskload_ps(src + full * kCols, m0));
      _mm256_storeu_ps(out + 8, _mm256_maskload_ps(src + full * kCols + 8, m1));
    }
  }
}

}  // namespace

void GemmTransA(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleC(m * n, beta, c);
  const int64_t tiles = (m + kRows - 1) / kRows, panels = (n + kCols - 1) / kCols;
  const int64_t block_k = std::min(k, kTransABlockK);
  thread_local std::vector<float> packed_a, packed_b;
  packed_a.resize(kTransATilesPerBlock * kRows * block_k);
  packed_b.resize(panels * kCols * block_k);
  for (int64_t p0 = 0; p0 < k; p0 += kTransABlockK) {
    const int64_t kc = std::min(kTransABlockK, k - p0);
    // Later blocks of k add to what the earlier ones stored.
    const float block_beta = p0 == 0 ? beta : 1.0f;
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(block_beta);
    PackPanels(b + p0 * n, n, kc, n, packed_b.data());
    for (int64_t t0 = 0; t0 < tiles; t0 += kTransATilesPerBlock) {
      const int64_t t1 = std::min(tiles, t0 + kTransATilesPerBlock);
      // A^T in tiles of 6 of its rows (columns of A), kc steps of 6 floats each; a partial
      // last tile repeats its last column (computed, never stored).
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t i0 = t * kRows, mr = std::min(kRows, m - i0);
        float* dst = packed_a.data() + (t - t0) * kRows * kc;
        const float* src = a + p0 * m + i0;
        if (mr == kRows) {
          for (int64_t p = 0; p < kc; ++p, src += m, dst += kRows) {
#pragma GCC unroll 6
            for (int64_t x = 0; x < kRows; ++x) dst[x] = src[x];
          }
        } else {
          for (int64_t p = 0; p < kc; ++p, src += m, dst += kRows) {
            for (int64_t x = 0; x < kRows; ++x) dst[x] = src[std::min(x, mr - 1)];
          }
        }
      }
      for (int64_t jp = 0; jp < panels; ++jp) {
        const int64_t j = jp * kCols, nr = std::min(kCols, n - j);
        const __m256i m0 = LaneMask(std::min<int64_t>(nr, 8));
        const __m256i m1 = LaneMask(std::max<int64_t>(nr - 8, 0));
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t i = t * kRows, mr = std::min(kRows, m - i);
          const float* tile_a = packed_a.data() + (t - t0) * kRows * kc;
          const float* rows[kRows] = {tile_a,     tile_a + 1, tile_a + 2,
                                      tile_a + 3, tile_a + 4, tile_a + 5};
          MicroKernel<kRows>(kc, rows, packed_b.data() + jp * kCols * kc, [&](__m256 acc[][2]) {
#pragma GCC unroll 6
            for (int64_t x = 0; x < kRows; ++x) {
              if (x == mr) break;
              float* out = c + (i + x) * n + j;
              __m256 lo = _mm256_mul_ps(va, acc[x][0]), hi = _mm256_mul_ps(va, acc[x][1]);
              if (nr == kCols) {
                if (block_beta != 0) {
                  lo = _mm256_fmadd_ps(vb, _mm256_loadu_ps(out), lo);
                  hi = _mm256_fmadd_ps(vb, _mm256_loadu_ps(out + 8), hi);
                }
                _mm256_storeu_ps(out, lo);
                _mm256_storeu_ps(out + 8, hi);
              } else {
                if (block_beta != 0) {
                  lo = _mm256_fmadd_ps(vb, _mm256_maskload_ps(out, m0), lo);
                  hi = _mm256_fmadd_ps(vb, _mm256_maskload_ps(out + 8, m1), hi);
                }
                _mm256_maskstore_ps(out, m0, lo);
                _mm256_maskstore_ps(out + 8, m1, hi);
              }
            }
          });
        }
      }
    }
  }
}

void GemmTransB(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return ScaleC(m * n, beta, c);
  const int64_t panels = (m + kCols - 1) / kCols;
  const int64_t block_k = std::min(k, kTransBBlockK);
  thread_local std::vector<float> packed_a;
  packed_a.resize(std::min(panels, kTransBPanelsPerBlock) * kCols * block_k);
  for (int64_t t0 = 0; t0 < panels; t0 += kTransBPanelsPerBlock) {
    const int64_t t1 = std::min(panels, t0 + kTransBPanelsPerBlock);
    for (int64_t p0 = 0; p0 < k; p0 += kTransBBlockK) {
      const int64_t kc = std::min(kTransBBlockK, k - p0);
      // Later blocks of k add to what the earlier ones stored.
      const float block_beta = p0 == 0 ? beta : 1.0f;
      // A^T in panels of 16 rows of A (the batch), kc steps of 16 floats each; rows past m
      // repeat row m - 1 (computed, never stored).
      for (int64_t t = t0; t < t1; ++t) {
        float* dst = packed_a.data() + (t - t0) * kCols * kc;
        for (int64_t q = 0; q < kCols; ++q) {
          const float* src = a + std::min(t * kCols + q, m - 1) * k + p0;
          for (int64_t p = 0; p < kc; ++p) dst[p * kCols + q] = src[p];
        }
      }
      for (int64_t j0 = 0; j0 < n; j0 += kTransBRowsPerBlock) {
        const int64_t j1 = std::min(n, j0 + kTransBRowsPerBlock);
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t i = t * kCols, mr = std::min(kCols, m - i);
          const float* panel = packed_a.data() + (t - t0) * kCols * kc;
          for (int64_t j = j0; j < j1; j += kRows) {
            const int64_t nr = std::min(kRows, n - j);
            const float* rows[kRows];
            for (int64_t x = 0; x < kRows; ++x) rows[x] = b + std::min(j + x, n - 1) * k + p0;
            // acc[x] holds C[i .. i + 16][j + x]: it is stored transposed.
            alignas(32) float cols[kRows][kCols];
            MicroKernel<1>(kc, rows, panel, [&](__m256 acc[][2]) {
#pragma GCC unroll 6
              for (int x = 0; x < kRows; ++x) {
                _mm256_store_ps(cols[x], acc[x][0]);
                _mm256_store_ps(cols[x] + 8, acc[x][1]);
              }
            });
            for (int64_t q = 0; q < mr; ++q) {
              float* out = c + (i + q) * n + j;
              if (block_beta == 0) {
                for (int64_t x = 0; x < nr; ++x) out[x] = alpha * cols[x][q];
              } else {
                for (int64_t x = 0; x < nr; ++x) {
                  out[x] = alpha * cols[x][q] + block_beta * out[x];
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace lockstep::engine::cpu

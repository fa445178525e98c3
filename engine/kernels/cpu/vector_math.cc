#include "engine/kernels/cpu/vector_math.h"

#include <immintrin.h>

#include <algorithm>

namespace lockstep::engine::cpu {
namespace {

inline __m256 Set(float v) { return _mm256_set1_ps(v); }

// exp(x): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), exp(r) by a degree-7
// polynomial, 2^n built in the exponent bits. Below -88.38 the result is 0.
inline __m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, Set(-88.3762626647949f)), Set(88.3762626647949f));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, Set(1.44269504088896341f), Set(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, Set(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, Set(-2.12194440e-4f), r);
  __m256 p = Set(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, Set(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, Set(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, Set(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, Set(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, Set(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, Set(1.f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// erf(v) = v * P(v^2) / Q(v^2) on [-4, 4] (clamped: erf(4) is 1 in f32).
inline __m256 Erf(__m256 v) {
  const __m256 x = _mm256_min_ps(_mm256_max_ps(v, Set(-4.f)), Set(4.f));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_fmadd_ps(x2, Set(-2.72614225801306e-10f), Set(2.77068142495902e-08f));
  p = _mm256_fmadd_ps(x2, p, Set(-2.10102402082508e-06f));
  p = _mm256_fmadd_ps(x2, p, Set(-5.69250639462346e-05f));
  p = _mm256_fmadd_ps(x2, p, Set(-7.34990630326855e-04f));
  p = _mm256_fmadd_ps(x2, p, Set(-2.95459980854025e-03f));
  p = _mm256_fmadd_ps(x2, p, Set(-1.60960333262415e-02f));
  __m256 q = _mm256_fmadd_ps(x2, Set(-1.45660718464996e-05f), Set(-2.13374055278905e-04f));
  q = _mm256_fmadd_ps(x2, q, Set(-1.68282697438203e-03f));
  q = _mm256_fmadd_ps(x2, q, Set(-7.37332916720468e-03f));
  q = _mm256_fmadd_ps(x2, q, Set(-1.42647390514189e-02f));
  return _mm256_div_ps(_mm256_mul_ps(x, p), q);
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2.
inline __m256 Phi(__m256 x) {
  return _mm256_fmadd_ps(Erf(_mm256_mul_ps(x, Set(0.7071067811865476f))), Set(0.5f), Set(0.5f));
}

inline __m256 GeluLanes(__m256 x) { return _mm256_mul_ps(x, Phi(x)); }

inline __m256 GeluGradientLanes(__m256 x, __m256 dy) {
  const __m256 density =
      _mm256_mul_ps(Set(0.3989422804014327f), Exp(_mm256_mul_ps(Set(-0.5f), _mm256_mul_ps(x, x))));
  return _mm256_mul_ps(dy, _mm256_fmadd_ps(x, density, Phi(x)));
}

}  // namespace

void GeluForward(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, GeluLanes(_mm256_loadu_ps(x + i)));
  if (i == n) return;
  alignas(32) float in[8] = {}, out[8];
  std::copy(x + i, x + n, in);
  _mm256_store_ps(out, GeluLanes(_mm256_load_ps(in)));
  std::copy(out, out + (n - i), y + i);
}

void GeluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dx + i, GeluGradientLanes(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i)));
  }
  if (i == n) return;
  alignas(32) float in[8] = {}, grad[8] = {}, out[8];
  std::copy(x + i, x + n, in);
  std::copy(dy + i, dy + n, grad);
  _mm256_store_ps(out, GeluGradientLanes(_mm256_load_ps(in), _mm256_load_ps(grad)));
  std::copy(out, out + (n - i), dx + i);
}

}  // namespace lockstep::engine::cpu

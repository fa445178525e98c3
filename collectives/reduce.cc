#include "collectives/reduce.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace lockstep {
namespace collectives {
namespace {

// Every operator is commutative bit for bit, so two ranks combining the same pair in
// opposite orders agree. IEEE + and * are, except for which NaN payload survives (x86 keeps
// the first operand's): a NaN result becomes the canonical quiet NaN (a compare and a blend
// per vector, free in these memory-bound loops). For MIN and MAX, a NaN on either side gives
// the canonical NaN too, and -0 counts below +0 (IEEE 754-2019 minimum and maximum).
template <typename T>
T Canonical(T r) {
  if constexpr (std::is_floating_point_v<T>) {
    return r != r ? std::numeric_limits<T>::quiet_NaN() : r;
  }
  return r;
}
// Integer SUM and PROD wrap around (two's complement, what MPI and NCCL give in practice):
// they are computed in the unsigned type, where overflow is defined (in the signed type it is
// undefined behaviour). The instructions are the same (vpaddd, vpmulld, ...): the loops still
// vectorise.
template <typename T>
struct SumOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return Canonical(a + b);
    }
  }
};
template <typename T>
struct ProdOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return Canonical(a * b);
    }
  }
};
template <typename T>
struct MinOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
      if (a == b) return std::signbit(a) ? a : b;
    }
    return b < a ? b : a;
  }
};
template <typename T>
struct MaxOp {
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
      if (a == b) return std::signbit(a) ? b : a;
    }
    return a < b ? b : a;
  }
};

// The compiler vectorises these loops (-O2 -march=x86-64-v3); __restrict tells it the
// buffers do not overlap.
template <typename T, typename F>
void Loop(T* __restrict inout, const T* __restrict in, size_t count, F f) {
  for (size_t i = 0; i < count; ++i) inout[i] = f(inout[i], in[i]);
}

template <typename T>
void ReduceTyped(ReduceOp op, void* inout, const void* in, size_t count) {
  T* a = static_cast<T*>(inout);
  const T* b = static_cast<const T*>(in);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      Loop(a, b, count, SumOp<T>());
      return;
    case ReduceOp::kProd:
      Loop(a, b, count, ProdOp<T>());
      return;
    case ReduceOp::kMin:
      Loop(a, b, count, MinOp<T>());
      return;
    case ReduceOp::kMax:
      Loop(a, b, count, MaxOp<T>());
      return;
  }
}

// 16-bit floats: widen 8 at a time into f32, combine, round back. F16C gives the f16
// conversions; bf16 is the top half of an f32.
template <typename F>
void ReduceHalf(uint16_t* a, const uint16_t* b, size_t count, F f) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    alignas(32) float xs[8], ys[8];
    _mm256_store_ps(xs, x);
    _mm256_store_ps(ys, y);
    for (int k = 0; k < 8; ++k) xs[k] = f(xs[k], ys[k]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a + i),
                     _mm256_cvtps_ph(_mm256_load_ps(xs), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < count; ++i) a[i] = FloatToHalf(f(HalfToFloat(a[i]), HalfToFloat(b[i])));
}

// 8 bf16 -> 8 f32: the bf16 bits are the top half of the f32's.
__m256 WidenBFloat16(const void* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// 8 f32 -> 8 bf16 in the low 16 bits of each 32-bit lane, as FloatToBFloat16: adds 0x7fff
// plus the lowest kept bit (round to nearest even), except for NaNs, which keep their top
// bits with the quiet bit set.
__m256i NarrowToBFloat16Lanes(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

// 8 f32 -> 8 bf16 stored at p.
void StoreBFloat16(void* p, __m256 x) {
  const __m256i lanes = NarrowToBFloat16Lanes(x);
  // packus works per 128-bit lane: [a0..3 a0..3 | a4..7 a4..7]; take 64-bit blocks 0 and 2.
  const __m256i packed =
      _mm256_permute4x64_epi64(_mm256_packus_epi32(lanes, lanes), _MM_SHUFFLE(3, 1, 2, 0));
  _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

// SUM, the gradients' operator, 16 at a time in registers and in fewer instructions than the
// generic loop below, which goes through arrays and is bound by its instruction count
// (bench/mixed_precision.md): the bf16 values are widened by interleaving them with zeros
// (element order [0-3, 8-11] and [4-7, 12-15], which packus restores), and the sums' NaNs
// become the canonical quiet NaN first, as SumOp's do, whose rounding then needs no NaN case
// (0x7fc00000 rounds to 0x7fc0).
void SumBFloat16(uint16_t* a, const uint16_t* b, size_t count) {
  const __m256 canonical = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1),
                half = _mm256_set1_epi32(0x7fff);
  auto round = [&](__m256 s) {  // to nearest even, NaNs already canonical
    s = _mm256_blendv_ps(s, canonical, _mm256_cmp_ps(s, s, _CMP_UNORD_Q));
    const __m256i bits = _mm256_castps_si256(s);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    return _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, half)), 16);
  };
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256 lo = _mm256_add_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)),
                                    _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, y)));
    const __m256 hi = _mm256_add_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)),
                                    _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, y)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i),
                        _mm256_packus_epi32(round(lo), round(hi)));
  }
  for (; i < count; ++i) {
    a[i] = FloatToBFloat16(SumOp<float>()(BFloat16ToFloat(a[i]), BFloat16ToFloat(b[i])));
  }
}

template <typename F>
void ReduceBFloat16(uint16_t* a, const uint16_t* b, size_t count, F f) {
  if constexpr (std::is_same_v<F, SumOp<float>>) return SumBFloat16(a, b, count);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    alignas(32) float xs[8], ys[8];
    _mm256_store_ps(xs, WidenBFloat16(a + i));
    _mm256_store_ps(ys, WidenBFloat16(b + i));
    for (int k = 0; k < 8; ++k) xs[k] = f(xs[k], ys[k]);
    StoreBFloat16(a + i, _mm256_load_ps(xs));
  }
  for (; i < count; ++i) {
    a[i] = FloatToBFloat16(f(BFloat16ToFloat(a[i]), BFloat16ToFloat(b[i])));
  }
}

template <template <typename> class Op>
void Reduce16(DType dtype, void* inout, const void* in, size_t count) {
  auto* a = static_cast<uint16_t*>(inout);
  auto* b = static_cast<const uint16_t*>(in);
  if (dtype == DType::kF16) {
    ReduceHalf(a, b, count, Op<float>());
  } else {
    ReduceBFloat16(a, b, count, Op<float>());
  }
}

void Reduce16Any(DType dtype, ReduceOp op, void* inout, const void* in, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      return Reduce16<SumOp>(dtype, inout, in, count);
    case ReduceOp::kProd:
      return Reduce16<ProdOp>(dtype, inout, in, count);
    case ReduceOp::kMin:
      return Reduce16<MinOp>(dtype, inout, in, count);
    case ReduceOp::kMax:
      return Reduce16<MaxOp>(dtype, inout, in, count);
  }
}

}  // namespace

float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
uint16_t FloatToHalf(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

void FloatsToBFloat16(const float* in, uint16_t* out, size_t count) {
  // In place, element i's bf16 lands at byte 2i, below the f32 bytes [4i, 4i+4) still to be
  // read: each block of 16 is loaded whole before its 32 bytes are stored.
  const char* src = reinterpret_cast<const char*>(in);
  char* dst = reinterpret_cast<char*>(out);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256 x0 = _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i));
    const __m256 x1 = _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i + 32));
    const __m256i packed = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(NarrowToBFloat16Lanes(x0), NarrowToBFloat16Lanes(x1)),
        _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), packed);
  }
  for (; i < count; ++i) {
    float f;
    std::memcpy(&f, src + 4 * i, sizeof(f));
    const uint16_t b = FloatToBFloat16(f);
    std::memcpy(dst + 2 * i, &b, sizeof(b));
  }
}

void BFloat16ToFloats(const uint16_t* in, float* out, size_t count) {
  // In place, element i's f32 bytes [4i, 4i+4) cover bf16 elements 2i and 2i+1, which were
  // read before: the last elements are widened first, each block loaded before it is stored.
  const char* src = reinterpret_cast<const char*>(in);
  char* dst = reinterpret_cast<char*>(out);
  size_t i = count;
  for (; i % 8 != 0; --i) {
    uint16_t b;
    std::memcpy(&b, src + 2 * (i - 1), sizeof(b));
    const float f = BFloat16ToFloat(b);
    std::memcpy(dst + 4 * (i - 1), &f, sizeof(f));
  }
  for (; i >= 8; i -= 8) {
    const __m256 x = WidenBFloat16(src + 2 * (i - 8));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + 4 * (i - 8)), x);
  }
}

void Reduce(DType dtype, ReduceOp op, void* inout, const void* in, size_t count) {
  switch (dtype) {
    case DType::kF32:
      return ReduceTyped<float>(op, inout, in, count);
    case DType::kF64:
      return ReduceTyped<double>(op, inout, in, count);
    case DType::kI32:
      return ReduceTyped<int32_t>(op, inout, in, count);
    case DType::kI64:
      return ReduceTyped<int64_t>(op, inout, in, count);
    case DType::kF16:
    case DType::kBF16:
      return Reduce16Any(dtype, op, inout, in, count);
  }
}

void FinishMean(DType dtype, ReduceOp op, void* data, size_t count, int world_size) {
  if (op != ReduceOp::kMean || world_size <= 1) return;
  switch (dtype) {
    case DType::kF32: {
      auto* p = static_cast<float*>(data);
      const float n = static_cast<float>(world_size);
      for (size_t i = 0; i < count; ++i) p[i] /= n;
      return;
    }
    case DType::kF64: {
      auto* p = static_cast<double*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= world_size;
      return;
    }
    case DType::kI32: {
      auto* p = static_cast<int32_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= world_size;
      return;
    }
    case DType::kI64: {
      auto* p = static_cast<int64_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= world_size;
      return;
    }
    case DType::kF16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = FloatToHalf(HalfToFloat(p[i]) / world_size);
      return;
    }
    case DType::kBF16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) {
        p[i] = FloatToBFloat16(BFloat16ToFloat(p[i]) / world_size);
      }
      return;
    }
  }
}

}  // namespace collectives
}  // namespace lockstep

// bf16 (the top 16 bits of an IEEE f32) and its conversions, one scalar definition for every
// layer: collectives' bf16 compression and reduction (collectives/reduce.h, whose vector loops
// give these bits 8 and 16 at a time), the engine's mixed-precision products on the CPU, and the
// GPU cast kernel (engine/kernels/gpu/kernel_bodies.h), which nvcc compiles from this header as
// __host__ __device__ code.
//
// FloatToBFloat16 rounds to nearest even (0x7fff plus the lowest kept bit, then truncation;
// what cuBLAS's and PyTorch's conversions do); a NaN keeps its sign and top bits with the quiet
// bit set, so it stays a NaN; infinities and overflow to infinity behave as in f32.
// BFloat16ToFloat is exact. Pure functions.
#ifndef LOCKSTEP_COMMON_BFLOAT16_H_
#define LOCKSTEP_COMMON_BFLOAT16_H_

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define LOCKSTEP_BF16_FN __host__ __device__ inline
#else
#define LOCKSTEP_BF16_FN inline
#endif

namespace lockstep {

LOCKSTEP_BF16_FN uint32_t FloatBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
#endif
}

LOCKSTEP_BF16_FN float FloatFromBits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

LOCKSTEP_BF16_FN uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  }
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

LOCKSTEP_BF16_FN float BFloat16ToFloat(uint16_t b) {
  return FloatFromBits(static_cast<uint32_t>(b) << 16);
}

// f, rounded to the nearest bf16 and widened back: an f32 holding a bf16 value exactly.
LOCKSTEP_BF16_FN float RoundToBFloat16(float f) { return BFloat16ToFloat(FloatToBFloat16(f)); }

}  // namespace lockstep

#undef LOCKSTEP_BF16_FN

#endif  // LOCKSTEP_COMMON_BFLOAT16_H_

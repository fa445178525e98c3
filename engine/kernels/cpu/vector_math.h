// Element-wise f32 functions written for AVX2 + FMA (x86-64-v3, as the whole build), eight
// lanes at a time: the activations whose scalar loops the compiler leaves scalar (a division
// and a libm exp per element). A tail shorter than eight goes through the same lanes
// (padded), so an element's result never depends on its position or on n: a step computes
// the same values whatever the batch split across replicas.
//
// GELU is the exact form x * Phi(x) (Phi the standard normal CDF), with erf as a rational
// approximation (max absolute error 5e-7, Eigen's coefficients) and exp as Cephes' expf
// polynomial after range reduction (relative error about 2 ulp); NaN propagates.
// Thread-safe: pure functions. Input and output may be the same array, not otherwise overlap.
#ifndef LOCKSTEP_ENGINE_KERNELS_CPU_VECTOR_MATH_H_
#define LOCKSTEP_ENGINE_KERNELS_CPU_VECTOR_MATH_H_

#include <cstdint>

namespace lockstep::engine::cpu {

// y = x * Phi(x).
void GeluForward(const float* x, float* y, int64_t n);
// dx = dy * (Phi(x) + x * phi(x)), phi the standard normal density.
void GeluBackward(const float* x, const float* dy, float* dx, int64_t n);

}  // namespace lockstep::engine::cpu

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_VECTOR_MATH_H_

// Element-wise reduction kernels used by every algorithm.
//
// Reduce(dtype, op, inout, in, count): inout[i] = op(inout[i], in[i]). kMean reduces like
// kSum; FinishMean divides by the world size once at the end. Every operator is commutative
// element by element, bit for bit (NaN results are the canonical quiet NaN; MIN/MAX order -0
// below +0), so a pair of ranks combining the same two values in either order gets bitwise
// the same result: this is what keeps results deterministic.
// i32/i64 SUM and PROD wrap around on overflow (two's complement), never undefined behaviour.
// f16/bf16: every step is computed in f32 (the operands widen exactly) and its result rounded
// to the 16-bit type once, to nearest even, as NCCL does. The partial results that travel
// between ranks are 16-bit, so a sum over n ranks is rounded n-1 times, in the algorithm's
// fixed order (the same on every rank); FinishMean divides in f32 and rounds once more.
// Thread model: pure functions.
#ifndef LOCKSTEP_COLLECTIVES_REDUCE_H_
#define LOCKSTEP_COLLECTIVES_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "collectives/types.h"
#include "common/bfloat16.h"

namespace lockstep {
namespace collectives {

void Reduce(DType dtype, ReduceOp op, void* inout, const void* in, size_t count);

// For kMean: data[i] /= world_size. A no-op for other operators.
void FinishMean(DType dtype, ReduceOp op, void* data, size_t count, int world_size);

// f32 -> bf16, each rounded as FloatToBFloat16 (to nearest even; NaNs stay quiet NaNs),
// 16 at a time with AVX2. In place when `out` aliases `in` (the bf16 values then fill the
// first half of its bytes): how FusedAllReduce's bf16 compression narrows a gradient in its
// own buffer, with no buffer of its own.
void FloatsToBFloat16(const float* in, uint16_t* out, size_t count);
// bf16 -> f32 (exact), 8 at a time. In place when `out` aliases `in` (the values are
// widened from the last, so none is overwritten before it is read).
void BFloat16ToFloats(const uint16_t* in, float* out, size_t count);

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
// The scalar bf16 conversions, shared with the engine (common/bfloat16.h).
using ::lockstep::BFloat16ToFloat;
using ::lockstep::FloatToBFloat16;

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_REDUCE_H_

// The plain-data arguments of the sequence-model kernels (GpuKernels' "Sequence models" block,
// kernel_bodies_seq.h): which activation or element-wise op, the index plan of a reduction
// over any axes and of a concatenation. Passed by value to a kernel launch, so fixed-size
// (kMaxRank axes, kMaxConcatInputs inputs: the ops refuse more, naming the node).
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_SEQ_PARAMS_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_SEQ_PARAMS_H_

#include <cstdint>

namespace lockstep::engine::gpu {

enum class ActivationOp { kSigmoid, kTanh, kGelu };
enum class BinaryOp { kAdd, kSub, kMul };
// The element type of integer-valued indices (embedding ids): i32, i64, or f32 holding
// integral values (a model's features).
enum class IndexType { kI32, kI64, kF32 };

inline constexpr int kMaxRank = 8;
inline constexpr int kMaxConcatInputs = 8;

// SUM or MEAN of a row-major tensor of dims[0..rank) over the axes marked `reduced`; the
// output (the kept axes in order) is multiplied by `scale` (1 for SUM, out/in for MEAN).
struct ReducePlan {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  float scale = 1.f;
};

// CONCAT as [outer, width_k] blocks side by side: output row o is input 0's row o, then
// input 1's, ...; row = sum of the widths.
struct ConcatPlan {
  int inputs = 0;
  const float* data[kMaxConcatInputs] = {};
  int64_t width[kMaxConcatInputs] = {};
  int64_t outer = 0;
};

// SELF_ATTENTION's layout change between a [batch * time, parts * heads * k] row matrix (QKV:
// parts = 3; the heads' outputs: parts = 1) and packed per-head matrices
// [parts, batch, heads, time, k].
struct HeadsLayout {
  int64_t parts = 1, batch = 0, heads = 0, time = 0, k = 0;
  int64_t elements() const { return parts * batch * heads * time * k; }
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_SEQ_PARAMS_H_

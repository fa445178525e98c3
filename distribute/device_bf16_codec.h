// DeviceBf16Codec: BF16 gradient compression (collectives::Compression::kBF16) for a GPU
// replica whose gradients lie in device memory and are all-reduced by NCCL in place
// (NcclAllReduce). FusedAllReduce hands it each f32 gradient of a pack; it narrows the
// gradient into bf16 scratch with GpuKernels::CastToBFloat16 (common/bfloat16.h's rounding, the
// one the CPU compression uses), the pack is all-reduced as ncclBfloat16 / ncclSum from that
// scratch, and Widen writes the result back into the f32 gradient with
// GpuKernels::CastFromBFloat16 (exact) and gives the scratch back.
//
// Stream order, no host synchronisation: the narrowing is enqueued on the device's compute
// stream when the gradient is added (after the kernels that wrote it); the pack's ready event,
// recorded on the compute stream when the pack is submitted, orders the all-reduce on the
// communication stream after it (NcclAllReduce); the widening is enqueued on the compute
// stream once the pack's collective is done, after the compute stream's wait for the pack's
// done event, and before the optimizer's kernels.
// The scratch comes from the device's caching allocator, whose blocks are ordered on the
// compute stream (the communication stream's use of it lies between two events of it): a step's
// scratch is the previous step's blocks again (no device allocation after the first step), and
// freeing it right after enqueueing the widening is safe.
//
// Ownership: borrows the GpuDevice (its context and kernels must outlive the codec).
// Thread model: used by its replica's thread only (as the GpuDevice's stream).
#ifndef LOCKSTEP_DISTRIBUTE_DEVICE_BF16_CODEC_H_
#define LOCKSTEP_DISTRIBUTE_DEVICE_BF16_CODEC_H_

#include "collectives/fused_all_reduce.h"
#include "engine/gpu/gpu_device.h"

namespace lockstep::distribute {

class DeviceBf16Codec final : public collectives::Bf16Codec {
 public:
  explicit DeviceBf16Codec(const engine::gpu::GpuDevice* gpu) : gpu_(gpu) {}

  // The allocator's RESOURCE_EXHAUSTED (naming the device) or the launch's error.
  absl::StatusOr<void*> Narrow(float* data, size_t count) override;
  absl::Status Widen(void* wire, float* data, size_t count) override;
  void Discard(void* wire) override;

 private:
  const engine::gpu::GpuDevice* const gpu_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DEVICE_BF16_CODEC_H_

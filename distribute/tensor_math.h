// Small host-side tensor arithmetic the distribution layer needs on its own (summing
// replicas' values, splitting and joining batches along axis 0), kept apart from the
// engine's graph kernels so that reductions have one fixed, documented order.
//
// Every arithmetic function works on f32, f64, i32 and i64 host tensors and answers
// INVALID_ARGUMENT (naming both shapes, the dtype, or a tensor on a GPU) instead of crashing;
// the AddInto and CloneWhereItLies that take a GpuDevice also work on f32 device tensors
// (gradient accumulation on GPU replicas), through the device's kernels and stream.
//
// The explicit host<->device copies of the distribution layer are here too (the only ones
// it makes): variables to a GPU replica's memory at creation, restore and broadcast, and back
// to the host for reductions that stage through it, checkpoints and evaluation. A GPU
// replica's feeds stay host tensors (HostCopy): its Executor copies them onto the device as
// they enter. Stateless; thread-safe (a device is driven by one thread at a time).
#ifndef LOCKSTEP_DISTRIBUTE_TENSOR_MATH_H_
#define LOCKSTEP_DISTRIBUTE_TENSOR_MATH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/types.h"
#include "engine/device.h"
#include "engine/gpu/gpu_device.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

// *acc += x, element-wise; same dtype and shape.
absl::Status AddInto(const engine::Tensor& x, engine::Tensor* acc);
// *acc += x where both lie: on the host as above; two f32 tensors of one GPU through `gpu`'s
// Add kernel (its handles), enqueued on its compute stream (ordered with the executor's and
// NCCL's work there; y = a + b rounds as the host's acc += x). INVALID_ARGUMENT for tensors on
// different devices, another dtype on a GPU, or mismatched shapes; FAILED_PRECONDITION
// without `gpu` for device tensors. Gradient accumulation uses it (distribute/trainer.h).
absl::Status AddInto(const engine::Tensor& x, engine::Tensor* acc,
                     const engine::gpu::GpuDevice* gpu);
// A deep copy of `x` where it lies: Clone on the host; a device-to-device copy on `gpu`
// (allocated from its caching allocator, enqueued on its stream).
absl::StatusOr<engine::Tensor> CloneWhereItLies(const engine::Tensor& x,
                                                const engine::gpu::GpuDevice* gpu);
// *t /= divisor (integer division for integer dtypes, as tf.distribute's MEAN).
absl::Status DivideBy(double divisor, engine::Tensor* t);
// Sum over axis 0: [n, d...] -> [d...]. Rank 0 is refused.
absl::StatusOr<engine::Tensor> SumAxis0(const engine::Tensor& x);
// Rows [begin, end) of axis 0 (a copy), end clamped to dim 0; may be empty.
absl::StatusOr<engine::Tensor> SliceAxis0(const engine::Tensor& x, int64_t begin, int64_t end);
// Joins along axis 0; every part has the same dtype and trailing dimensions.
absl::StatusOr<engine::Tensor> ConcatAxis0(const std::vector<engine::Tensor>& parts);
// A host deep copy of host tensor `x` for a replica on `device`: tagged `device` for a
// logical CPU device (they share host memory), /cpu:0 for a GPU replica (its host-side
// values: feeds, per-replica inputs).
engine::Tensor HostCopy(const engine::Tensor& x, const engine::Device& device);
// A copy of host tensor `x` in `device`'s memory: HostCopy on a CPU device; on "/gpu:N" a
// device tensor of `gpu` (which must be that device's handles), the copy completed.
// FAILED_PRECONDITION naming the device without `gpu`; the device's errors (its
// RESOURCE_EXHAUSTED names it).
absl::StatusOr<engine::Tensor> CopyToDevice(const engine::Tensor& x, const engine::Device& device,
                                            const engine::gpu::GpuDevice* gpu);
// The buffer a collective reads and writes in place: the device pointer of a GPU tensor (NCCL
// takes device buffers), the host buffer otherwise.
void* CollectiveBuffer(engine::Tensor& t);
// `x` readable on the host: itself when it is a host tensor, else a host copy through `gpu`
// (its device's handles; FAILED_PRECONDITION without them).
absl::StatusOr<engine::Tensor> ToHost(const engine::Tensor& x, const engine::gpu::GpuDevice* gpu);
// Host tensor `host`'s bytes into the existing `*dst` (same dtype and shape), on the host or
// on `dst`'s GPU through `gpu`, completed when this returns.
absl::Status CopyInto(const engine::Tensor& host, engine::Tensor* dst,
                      const engine::gpu::GpuDevice* gpu);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_TENSOR_MATH_H_

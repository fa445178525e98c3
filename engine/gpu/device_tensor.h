// Tensors on a GPU: allocation from the device's DeviceContext (its caching allocator) and the
// explicit host<->device copies, the only ones the engine makes (feeds, variables and
// checkpoints, results). Free functions over a DeviceContext; see engine/tensor.h for what a
// GPU tensor refuses.
//
// Ordering: everything is enqueued on the context's stream. CopyToDevice returns before the
// copy has run: the host tensor's buffer must stay alive and unchanged until the context is
// synchronised (the executor synchronises at the end of each step; the fake runs nothing
// before that, so a violation shows in tests). CopyToHost synchronises: its result is ready.
//
// Errors: INVALID_ARGUMENT naming the tensor and both devices when a tensor is on the wrong
// side (or on another GPU than the context's); the allocator's RESOURCE_EXHAUSTED and the
// CudaApi's errors, naming the device.
#ifndef LOCKSTEP_ENGINE_GPU_DEVICE_TENSOR_H_
#define LOCKSTEP_ENGINE_GPU_DEVICE_TENSOR_H_

#include "absl/status/statusor.h"
#include "engine/gpu/device_context.h"
#include "engine/tensor.h"

namespace lockstep::engine::gpu {

// Uninitialised device memory, given back to the allocator when the last Tensor sharing it
// goes (the context must outlive it).
absl::StatusOr<Tensor> AllocateTensor(DeviceContext& context, DType dtype, const Shape& shape);
// AllocateTensor, then zeroed (enqueued).
absl::StatusOr<Tensor> ZerosOnDevice(DeviceContext& context, DType dtype, const Shape& shape);
// A device copy of a host tensor (enqueued; see above).
absl::StatusOr<Tensor> CopyToDevice(DeviceContext& context, const Tensor& host);
// A host copy of a device tensor of this context; synchronises.
absl::StatusOr<Tensor> CopyToHost(DeviceContext& context, const Tensor& device);
// `host`'s bytes into the existing device tensor `device` (same dtype and shape; enqueued).
absl::Status CopyInto(DeviceContext& context, const Tensor& host, Tensor* device);

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_DEVICE_TENSOR_H_

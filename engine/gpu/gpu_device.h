// GpuDevice: the handles the engine needs to run on one GPU ("/gpu:N"): its DeviceContext
// (stream, allocator, copies), its kernels (GpuKernels) and its matrix products (BlasApi).
//
// How engine code finds a device: it is handed one. Whoever makes the replica (a worker for
// its GPU, a test with the fakes) builds the three objects, fills a GpuDevice and passes its
// address down: ExecutorOptions::gpu, then KernelContext::gpu for every kernel, and the
// Optimizer's Create. There is no registry or global lookup by device index, so two tests (or
// two replicas) never share a device by accident, and a fake device is the same code path as
// a real one.
//
// Ownership: borrows all three (and the profiler, when set); they must outlive every Executor,
// Optimizer and tensor that uses them. Thread model: as DeviceContext (one thread at a time drives
// its stream).
#ifndef LOCKSTEP_ENGINE_GPU_GPU_DEVICE_H_
#define LOCKSTEP_ENGINE_GPU_GPU_DEVICE_H_

#include "engine/device.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/op_profiler.h"
#include "engine/kernels/gpu/blas_api.h"
#include "engine/kernels/gpu/gpu_kernels.h"

namespace lockstep::engine::gpu {

struct GpuDevice {
  DeviceContext* context = nullptr;
  GpuKernels* kernels = nullptr;
  BlasApi* blas = nullptr;
  // Set for a profiling run (op_profiler.h): the executor and the optimizer on this device
  // mark their work on its stream. Null (the default): no events, nothing recorded.
  OpProfiler* profiler = nullptr;

  Device device() const { return Device(Device::Type::kCuda, context->index()); }
  CudaStream stream() const { return context->stream(); }
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_GPU_DEVICE_H_

// The GPU side of kernels written once (portable.h): the Access policy of bare device pointers,
// the block API over __syncthreads, static shared memory and __shfl_xor_sync, and the one-line
// __global__ templates that run a kernel body. Included only by .cu files (--config=cuda).
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_CUDA_LAUNCH_CU_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_CUDA_LAUNCH_CU_H_

#include "engine/kernels/gpu/block_reduce.h"
#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

struct DeviceAccess {
  template <typename T>
  struct In {
    const T* p;
    LS_HOST_DEVICE T Load(int64_t i) const { return p[i]; }
  };
  template <typename T>
  struct Out {
    T* p;
    LS_HOST_DEVICE T Load(int64_t i) const { return p[i]; }
    LS_HOST_DEVICE void Store(int64_t i, T v) const { p[i] = v; }
  };
};

// The block API (block_reduce.h) of a CUDA block.
struct CudaBlock {
  float* shared;
  double* shared_f64;
  __device__ void Sync() { __syncthreads(); }
  __device__ float WarpSum(float v) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      v = v + __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
  }
  __device__ float WarpMax(float v) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      v = Max(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
  }
  __device__ double WarpSumF64(double v) {
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      v = v + __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
  }
  __device__ float* SharedFloats() { return shared; }
  __device__ double* SharedDoubles() { return shared_f64; }
};

__device__ inline ThreadIndex CudaThreadIndex() {
  return ThreadIndex{blockIdx.x, threadIdx.x, blockDim.x, gridDim.x};
}

template <class K>
__global__ void RunKernel(K kernel) {
  kernel(CudaThreadIndex());
}

template <class K>
__global__ void RunBlockKernel(K kernel) {
  __shared__ float shared[kSharedFloats];
  __shared__ double shared_f64[kWarpSize];
  CudaBlock block{shared, shared_f64};
  kernel(CudaThreadIndex(), block);
}

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_CUDA_LAUNCH_CU_H_

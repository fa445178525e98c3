// Block-wide reductions written once over the block API that a CUDA block (cuda_launch.cu.h)
// and the grid emulator's block (grid_emulator.h) both provide:
//   void Sync()                  __syncthreads(): every thread of the block reaches it
//   float WarpSum(float v)       a butterfly over the 32 lanes of the warp (__shfl_xor_sync,
//   float WarpMax(float v)       offsets 16, 8, 4, 2, 1): every lane gets the same result
//   float* SharedFloats()        the block's shared memory, kSharedFloats floats
//   double WarpSumF64(double v)  WarpSum in double (the global norm's sums of squares)
//   double* SharedDoubles()      a second shared array, kWarpSize doubles
// Every thread of the block must call them (the reductions below are called uniformly), and
// block_dim is a multiple of kWarpSize, at most kWarpSize * kWarpSize. The order of additions
// is fixed by the block size, so a GPU and the emulator give the same bits.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_BLOCK_REDUCE_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_BLOCK_REDUCE_H_

#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

inline constexpr int kSharedFloats = kWarpSize;

// The sum of `v` over the block, in every thread: each warp's butterfly, then warp 0's lanes
// hold the warp totals (0 past the last warp) and every warp sums them the same way.
template <class Block>
LS_HOST_DEVICE float BlockSum(const ThreadIndex& t, Block& block, float v) {
  float* shared = block.SharedFloats();
  const int64_t lane = t.thread % kWarpSize, warp = t.thread / kWarpSize;
  v = block.WarpSum(v);
  if (lane == 0) shared[warp] = v;
  block.Sync();
  float total = lane < t.block_dim / kWarpSize ? shared[lane] : 0.f;
  total = block.WarpSum(total);
  block.Sync();  // shared memory may be reused after this
  return total;
}

// BlockSum in double, the same butterflies and order (the global norm for clipping).
template <class Block>
LS_HOST_DEVICE double BlockSumF64(const ThreadIndex& t, Block& block, double v) {
  double* shared = block.SharedDoubles();
  const int64_t lane = t.thread % kWarpSize, warp = t.thread / kWarpSize;
  v = block.WarpSumF64(v);
  if (lane == 0) shared[warp] = v;
  block.Sync();
  double total = lane < t.block_dim / kWarpSize ? shared[lane] : 0.0;
  total = block.WarpSumF64(total);
  block.Sync();
  return total;
}

// The maximum of `v` over the block, in every thread (-inf for no finite values).
template <class Block>
LS_HOST_DEVICE float BlockMax(const ThreadIndex& t, Block& block, float v) {
  float* shared = block.SharedFloats();
  const int64_t lane = t.thread % kWarpSize, warp = t.thread / kWarpSize;
  v = block.WarpMax(v);
  if (lane == 0) shared[warp] = v;
  block.Sync();
  float m = lane < t.block_dim / kWarpSize ? shared[lane] : shared[0];
  m = block.WarpMax(m);
  block.Sync();
  return m;
}

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_BLOCK_REDUCE_H_

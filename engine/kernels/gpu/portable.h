// What a GPU kernel body written once needs to compile both as CUDA and as host C++ (for the
// grid emulator, grid_emulator.h): LS_HOST_DEVICE (empty outside nvcc, as PyTorch's
// C10_HOST_DEVICE), the thread's place in the grid (ThreadIndex) and the grid-stride loop's
// index math in one place (FirstIndex, Stride), and the launch shape for n elements.
//
// A kernel body is a functor: `void operator()(const ThreadIndex&) const` for element-wise
// kernels, `template <class Block> void operator()(const ThreadIndex&, Block&) const` for
// kernels that cooperate through a block (block_reduce.h). It reads and writes memory through
// the accessors of an Access policy A (A::In<T>, A::Out<T>: Load(i), Store(i, v)); on a GPU
// they are bare pointers (cuda_launch.cu.h), in the emulator they check bounds and count writes.
// Math: fmaf only where the CPU code it mirrors fuses (the CUDA targets build with
// --fmad=false and the emulator with -ffp-contract=off, so nothing else is fused).
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_PORTABLE_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_PORTABLE_H_

#include <cstdint>

#ifdef __CUDACC__
#define LS_HOST_DEVICE __host__ __device__
#else
#define LS_HOST_DEVICE
#endif

namespace lockstep::engine::gpu {

// Where a thread is: blockIdx.x, threadIdx.x, blockDim.x, gridDim.x (one-dimensional grids).
struct ThreadIndex {
  int64_t block = 0;
  int64_t thread = 0;
  int64_t block_dim = 1;
  int64_t grid_dim = 1;
};

// The grid-stride loop: for (i = FirstIndex(t); i < n; i += Stride(t)) covers [0, n) once over
// all threads of the grid, whatever its size.
LS_HOST_DEVICE inline int64_t FirstIndex(const ThreadIndex& t) {
  return t.block * t.block_dim + t.thread;
}
LS_HOST_DEVICE inline int64_t Stride(const ThreadIndex& t) { return t.grid_dim * t.block_dim; }

// Block-wise loops (one block per row): rows block, block + grid_dim, ...; within a row,
// columns thread, thread + block_dim, ...
LS_HOST_DEVICE inline int64_t FirstRow(const ThreadIndex& t) { return t.block; }
LS_HOST_DEVICE inline int64_t RowStride(const ThreadIndex& t) { return t.grid_dim; }

// max as std::max_element picks it (the first of equals; NaN-free inputs give the same value).
LS_HOST_DEVICE inline float Max(float a, float b) { return a < b ? b : a; }

struct LaunchShape {
  int blocks = 1;
  int threads = 256;
};

inline constexpr int kThreadsPerBlock = 256;
inline constexpr int kMaxBlocks = 4096;
inline constexpr int kWarpSize = 32;

// A grid for n elements, bounded (the grid-stride loop covers the rest).
inline LaunchShape ElementwiseShape(int64_t n) {
  int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return LaunchShape{static_cast<int>(blocks), kThreadsPerBlock};
}

// A grid of one block per row (bounded), `threads` a multiple of kWarpSize.
inline LaunchShape RowShape(int64_t rows, int threads = kThreadsPerBlock) {
  int64_t blocks = rows < 1 ? 1 : rows;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return LaunchShape{static_cast<int>(blocks), threads};
}

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_PORTABLE_H_

// The shapes the convolutional kernels (kernel_bodies_cnn.h) work on, plain structs that a
// kernel body reads on the GPU and in the emulator alike:
//   WindowGeometry  a sliding window over an NHWC input (CONV2D's im2col/col2im, MAX_POOL2D),
//                   the GPU twin of cpu::Window (engine/kernels/cpu/window_ops.h), which the
//                   ops convert once (the CPU's struct sits beside protobuf headers nvcc need not
//                   see).
//   BatchNormDims   x seen as [rows, c] in groups of group_rows consecutive rows that share
//                   statistics (virtual batches; one group of every row otherwise).
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_CNN_GEOMETRY_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_CNN_GEOMETRY_H_

#include <cstdint>

#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

struct WindowGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input [n, h, w, c]
  int64_t kh = 1, kw = 1;              // window
  int64_t sh = 1, sw = 1;              // strides (> 0)
  int64_t oh = 0, ow = 0;              // output spatial size
  int64_t pad_top = 0, pad_left = 0;
  // The im2col matrix [rows, cols]: one row per output position, (ky, kx, ci) across.
  LS_HOST_DEVICE int64_t rows() const { return n * oh * ow; }
  LS_HOST_DEVICE int64_t cols() const { return kh * kw * c; }
  LS_HOST_DEVICE int64_t input_size() const { return n * h * w * c; }
  // A pooling output [n, oh, ow, c].
  LS_HOST_DEVICE int64_t pooled_size() const { return n * oh * ow * c; }
};

struct BatchNormDims {
  int64_t rows = 0;        // x's elements / c
  int64_t c = 0;           // channels (the last axis)
  int64_t group_rows = 0;  // rows per group; the last group may be smaller
  int64_t groups = 1;      // >= 1; one empty group when rows == 0
  LS_HOST_DEVICE int64_t Begin(int64_t g) const { return g * group_rows; }
  LS_HOST_DEVICE int64_t End(int64_t g) const {
    const int64_t e = (g + 1) * group_rows;
    return e < rows ? e : rows;
  }
  LS_HOST_DEVICE int64_t GroupOf(int64_t r) const { return group_rows > 0 ? r / group_rows : 0; }
  // The group's row count as the divisor of its means (1 for an empty group, as on the CPU).
  LS_HOST_DEVICE float Count(int64_t g) const {
    const int64_t n = End(g) - Begin(g);
    return float(n > 1 ? n : 1);
  }
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_CNN_GEOMETRY_H_

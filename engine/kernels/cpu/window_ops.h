// CPU building blocks of Conv2D and MaxPool2D over NHWC tensors: im2col / col2im (the
// convolution is then one GEMM) and max pooling with its gradient. Stateless.
#ifndef LOCKSTEP_ENGINE_KERNELS_CPU_WINDOW_OPS_H_
#define LOCKSTEP_ENGINE_KERNELS_CPU_WINDOW_OPS_H_

#include <cstdint>

#include "engine/shape.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine::cpu {

// Geometry of a sliding window over an NHWC input.
struct Window {
  int64_t n, h, w, c;  // input
  int64_t kh, kw;      // window
  int64_t sh, sw;      // strides
  int64_t oh, ow;      // output spatial size
  int64_t pad_top, pad_left;
  // Rows and columns of the im2col matrix: [n*oh*ow, kh*kw*c].
  int64_t rows() const { return n * oh * ow; }
  int64_t cols() const { return kh * kw * c; }
};

Window MakeWindow(const Shape& input, int64_t kh, int64_t kw, const v1::NodeDef& node);

// cols[(b, oy, ox), (ky, kx, ci)] = x[b, oy*sh + ky - pad_top, ox*sw + kx - pad_left, ci]
// (0 outside the input).
template <typename T>
void Im2Col(const T* x, const Window& w, T* cols);
// The adjoint of Im2Col: dx = sum of cols into their input positions (dx overwritten).
template <typename T>
void Col2Im(const T* cols, const Window& w, T* dx);

// y[b, oy, ox, ci] = max over the window (padding never wins).
template <typename T>
void MaxPool(const T* x, const Window& w, T* y);
// dx (overwritten): each dy goes to the first maximal element of its window.
template <typename T>
void MaxPoolGrad(const T* x, const Window& w, const T* dy, T* dx);

}  // namespace lockstep::engine::cpu

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_WINDOW_OPS_H_

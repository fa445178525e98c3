#include "engine/kernels/cpu/window_ops.h"

#include <cstring>
#include <limits>

#include "engine/shape_inference.h"

namespace lockstep::engine::cpu {

Window MakeWindow(const Shape& input, int64_t kh, int64_t kw, const v1::NodeDef& node) {
  Window w;
  w.n = input.dim(0), w.h = input.dim(1), w.w = input.dim(2), w.c = input.dim(3);
  w.kh = kh, w.kw = kw;
  w.sh = node.strides().empty() ? 1 : node.strides(0);
  w.sw = node.strides().empty() ? 1 : node.strides(node.strides_size() - 1);
  w.oh = WindowOutputSize(w.h, kh, w.sh, node.padding());
  w.ow = WindowOutputSize(w.w, kw, w.sw, node.padding());
  w.pad_top = WindowPadBefore(w.h, kh, w.sh, node.padding());
  w.pad_left = WindowPadBefore(w.w, kw, w.sw, node.padding());
  return w;
}

template <typename T>
void Im2Col(const T* x, const Window& w, T* cols) {
  T* out = cols;
  for (int64_t b = 0; b < w.n; ++b) {
    for (int64_t oy = 0; oy < w.oh; ++oy) {
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        for (int64_t ky = 0; ky < w.kh; ++ky) {
          int64_t iy = oy * w.sh + ky - w.pad_top;
          for (int64_t kx = 0; kx < w.kw; ++kx) {
            int64_t ix = ox * w.sw + kx - w.pad_left;
            if (iy < 0 || iy >= w.h || ix < 0 || ix >= w.w) {
              std::memset(out, 0, sizeof(T) * w.c);
            } else {
              std::memcpy(out, x + ((b * w.h + iy) * w.w + ix) * w.c, sizeof(T) * w.c);
            }
            out += w.c;
          }
        }
      }
    }
  }
}

template <typename T>
void Col2Im(const T* cols, const Window& w, T* dx) {
  std::memset(dx, 0, sizeof(T) * w.n * w.h * w.w * w.c);
  const T* in = cols;
  for (int64_t b = 0; b < w.n; ++b) {
    for (int64_t oy = 0; oy < w.oh; ++oy) {
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        for (int64_t ky = 0; ky < w.kh; ++ky) {
          int64_t iy = oy * w.sh + ky - w.pad_top;
          for (int64_t kx = 0; kx < w.kw; ++kx) {
            int64_t ix = ox * w.sw + kx - w.pad_left;
            if (iy >= 0 && iy < w.h && ix >= 0 && ix < w.w) {
              T* d = dx + ((b * w.h + iy) * w.w + ix) * w.c;
              for (int64_t ci = 0; ci < w.c; ++ci) d[ci] += in[ci];
            }
            in += w.c;
          }
        }
      }
    }
  }
}

// Calls fn(out_index, in_index_of_max) for every output element.
template <typename T, typename Fn>
void ForEachMax(const T* x, const Window& w, Fn fn) {
  for (int64_t b = 0; b < w.n; ++b) {
    for (int64_t oy = 0; oy < w.oh; ++oy) {
      for (int64_t ox = 0; ox < w.ow; ++ox) {
        for (int64_t ci = 0; ci < w.c; ++ci) {
          int64_t best = -1;
          T best_value = -std::numeric_limits<T>::infinity();
          for (int64_t ky = 0; ky < w.kh; ++ky) {
            int64_t iy = oy * w.sh + ky - w.pad_top;
            if (iy < 0 || iy >= w.h) continue;
            for (int64_t kx = 0; kx < w.kw; ++kx) {
              int64_t ix = ox * w.sw + kx - w.pad_left;
              if (ix < 0 || ix >= w.w) continue;
              int64_t idx = ((b * w.h + iy) * w.w + ix) * w.c + ci;
              if (best < 0 || x[idx] > best_value) {
                best = idx;
                best_value = x[idx];
              }
            }
          }
          fn(((b * w.oh + oy) * w.ow + ox) * w.c + ci, best);
        }
      }
    }
  }
}

template <typename T>
void MaxPool(const T* x, const Window& w, T* y) {
  ForEachMax(x, w, [&](int64_t o, int64_t i) { y[o] = i < 0 ? T(0) : x[i]; });
}

template <typename T>
void MaxPoolGrad(const T* x, const Window& w, const T* dy, T* dx) {
  std::memset(dx, 0, sizeof(T) * w.n * w.h * w.w * w.c);
  ForEachMax(x, w, [&](int64_t o, int64_t i) {
    if (i >= 0) dx[i] += dy[o];
  });
}

template void Im2Col<float>(const float*, const Window&, float*);
template void Im2Col<double>(const double*, const Window&, double*);
template void Col2Im<float>(const float*, const Window&, float*);
template void Col2Im<double>(const double*, const Window&, double*);
template void MaxPool<float>(const float*, const Window&, float*);
template void MaxPool<double>(const double*, const Window&, double*);
template void MaxPoolGrad<float>(const float*, const Window&, const float*, float*);
template void MaxPoolGrad<double>(const double*, const Window&, const double*, double*);

}  // namespace lockstep::engine::cpu

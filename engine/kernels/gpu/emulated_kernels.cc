#include "engine/kernels/gpu/emulated_kernels.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/kernels/gpu/grid_emulator.h"
#include "engine/kernels/gpu/kernel_bodies.h"

namespace lockstep::engine::gpu {
namespace {

using A = EmulatedAccess;

// The fake's host view of `n` floats at `p`, which must lie in one allocation.
absl::StatusOr<void*> View(FakeCudaApi* fake, const void* p, int64_t n, const char* kernel,
                           const char* name) {
  return fake->HostRange(p, static_cast<size_t>(n) * sizeof(float),
                         absl::StrCat("Launch(", kernel, ")"), name);
}

// The view of `bytes` bytes at `p`.
absl::StatusOr<void*> Bytes(FakeCudaApi* fake, const void* p, size_t bytes, const char* kernel,
                            const char* name) {
  return fake->HostRange(p, bytes, absl::StrCat("Launch(", kernel, ")"), name);
}

// A launch of one thread's work (the totals): one warp, thread 0 writes.
constexpr LaunchShape kSingle{1, kWarpSize};

// Runs kernel body K over (logits, labels, rest...) with the labels' integer type.
template <template <class, typename> class K, typename... Rest>
absl::Status RunLabelled(GridEmulator& emu, LaunchShape shape, bool labels_i64,
                         EmulatedAccess::In<float> x, const void* labels, int64_t rows,
                         Rest... rest) {
  if (labels_i64) {
    return emu.Run(shape, K<A, int64_t>{x, emu.In<int64_t>(labels, rows, "labels"), rest...});
  }
  return emu.Run(shape, K<A, int32_t>{x, emu.In<int32_t>(labels, rows, "labels"), rest...});
}

// Params whose device_gradient_scale (if any) points at the fake's host view of that float.
template <class Params>
absl::StatusOr<Params> HostParams(FakeCudaApi* fake, Params p, const char* kernel) {
  if (p.device_gradient_scale == nullptr) return p;
  LS_ASSIGN_OR_RETURN(void* scale,
                      View(fake, p.device_gradient_scale, 1, kernel, "device_gradient_scale"));
  p.device_gradient_scale = static_cast<const float*>(scale);
  return p;
}

}  // namespace

LaunchShape EmulatedKernels::Elementwise(int64_t n) const {
  LaunchShape shape = ElementwiseShape(n);
  shape.blocks = std::min(shape.blocks, options_.max_blocks);
  shape.threads = options_.threads;
  return shape;
}

LaunchShape EmulatedKernels::Rows(int64_t rows) const {
  LaunchShape shape = RowShape(rows, options_.threads);
  shape.blocks = std::min(shape.blocks, options_.max_blocks);
  return shape;
}

absl::Status EmulatedKernels::Axpy(float a, const float* x, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Axpy", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "Axpy", "x"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "Axpy", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Axpy", [=] {
    GridEmulator emu("Axpy", seed);
    return emu.Run(shape,
                   AxpyKernel<A>{a, emu.In<float>(xv, n, "x"), emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::CastToBFloat16(const float* x, uint16_t* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("CastToBFloat16", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "CastToBFloat16", "x"));
  LS_ASSIGN_OR_RETURN(void* yv, Bytes(fake_, y, n * sizeof(uint16_t), "CastToBFloat16", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "CastToBFloat16", [=] {
    GridEmulator emu("CastToBFloat16", seed);
    return emu.Run(shape, CastToBFloat16Kernel<A>{emu.In<float>(xv, n, "x"),
                                                  emu.Out<uint16_t>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::CastFromBFloat16(const uint16_t* x, float* y, int64_t n,
                                               CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("CastFromBFloat16", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Bytes(fake_, x, n * sizeof(uint16_t), "CastFromBFloat16", "x"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "CastFromBFloat16", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "CastFromBFloat16", [=] {
    GridEmulator emu("CastFromBFloat16", seed);
    return emu.Run(shape, CastFromBFloat16Kernel<A>{emu.In<uint16_t>(xv, n, "x"),
                                                    emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::Scale(const float* x, float scale, float* y, int64_t n,
                                    CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Scale", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "Scale", "x"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "Scale", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Scale", [=] {
    GridEmulator emu("Scale", seed);
    return emu.Run(shape,
                   ScaleKernel<A>{emu.In<float>(xv, n, "x"), scale, emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::Add(const float* a, const float* b, float* y, int64_t n,
                                  CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Add", n, {a, b, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* av, View(fake_, a, n, "Add", "a"));
  LS_ASSIGN_OR_RETURN(void* bv, View(fake_, b, n, "Add", "b"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "Add", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Add", [=] {
    GridEmulator emu("Add", seed);
    return emu.Run(shape, AddKernel<A>{emu.In<float>(av, n, "a"), emu.In<float>(bv, n, "b"),
                                       emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::Relu(const float* x, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Relu", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "Relu", "x"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "Relu", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Relu", [=] {
    GridEmulator emu("Relu", seed);
    return emu.Run(shape, ReluKernel<A>{emu.In<float>(xv, n, "x"), emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::ReluGrad(const float* x, const float* dy, float* dx, int64_t n,
                                       CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("ReluGrad", n, {x, dy, dx}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "ReluGrad", "x"));
  LS_ASSIGN_OR_RETURN(void* dyv, View(fake_, dy, n, "ReluGrad", "dy"));
  LS_ASSIGN_OR_RETURN(void* dxv, View(fake_, dx, n, "ReluGrad", "dx"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "ReluGrad", [=] {
    GridEmulator emu("ReluGrad", seed);
    return emu.Run(shape, ReluGradKernel<A>{emu.In<float>(xv, n, "x"), emu.In<float>(dyv, n, "dy"),
                                            emu.Out<float>(dxv, n, "dx"), n});
  });
}

absl::Status EmulatedKernels::SoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols,
                                          CudaStream s) {
  if (rows < 0 || cols < 0) return CheckLaunch("SoftmaxRows", -1, {});
  const int64_t n = rows * cols;
  LS_RETURN_IF_ERROR(CheckLaunch("SoftmaxRows", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "SoftmaxRows", "x"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "SoftmaxRows", "y"));
  const LaunchShape shape = Rows(rows);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "SoftmaxRows", [=] {
    GridEmulator emu("SoftmaxRows", seed);
    return emu.RunBlocks(shape, SoftmaxRowsKernel<A>{emu.In<float>(xv, n, "x"),
                                                     emu.Out<float>(yv, n, "y"), rows, cols});
  });
}

absl::Status EmulatedKernels::RowSum(const float* x, float* y, int64_t rows, int64_t cols,
                                     CudaStream s) {
  if (rows < 0 || cols < 0) return CheckLaunch("RowSum", -1, {});
  LS_RETURN_IF_ERROR(CheckLaunch("RowSum", rows, {y}));
  LS_RETURN_IF_ERROR(CheckLaunch("RowSum", rows * cols, {x}));
  if (rows == 0) return absl::OkStatus();
  const int64_t n = rows * cols;
  void* xv = nullptr;
  if (n > 0) {
    LS_ASSIGN_OR_RETURN(xv, View(fake_, x, n, "RowSum", "x"));
  }
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, rows, "RowSum", "y"));
  const LaunchShape shape = Rows(rows);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "RowSum", [=] {
    GridEmulator emu("RowSum", seed);
    return emu.RunBlocks(shape, RowSumKernel<A>{emu.In<float>(xv, n, "x"),
                                                emu.Out<float>(yv, rows, "y"), rows, cols});
  });
}

absl::Status EmulatedKernels::Momentum(const MomentumParams& p, const float* g, float* v, float* w,
                                       int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Momentum", n, {g, v, w}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* gv, View(fake_, g, n, "Momentum", "g"));
  LS_ASSIGN_OR_RETURN(void* vv, View(fake_, v, n, "Momentum", "v"));
  LS_ASSIGN_OR_RETURN(void* wv, View(fake_, w, n, "Momentum", "w"));
  LS_ASSIGN_OR_RETURN(const MomentumParams hp, HostParams(fake_, p, "Momentum"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Momentum", [=, p = hp] {
    GridEmulator emu("Momentum", seed);
    return emu.Run(shape,
                   MomentumKernel<A>{p, emu.In<float>(gv, n, "g"), emu.Out<float>(vv, n, "v"),
                                     emu.Out<float>(wv, n, "w"), n});
  });
}

absl::Status EmulatedKernels::Adam(const AdamParams& p, const float* g, float* m, float* v,
                                   float* w, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Adam", n, {g, m, v, w}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* gv, View(fake_, g, n, "Adam", "g"));
  LS_ASSIGN_OR_RETURN(void* mv, View(fake_, m, n, "Adam", "m"));
  LS_ASSIGN_OR_RETURN(void* vv, View(fake_, v, n, "Adam", "v"));
  LS_ASSIGN_OR_RETURN(void* wv, View(fake_, w, n, "Adam", "w"));
  LS_ASSIGN_OR_RETURN(const AdamParams hp, HostParams(fake_, p, "Adam"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Adam", [=, p = hp] {
    GridEmulator emu("Adam", seed);
    return emu.Run(shape, AdamKernel<A>{p, emu.In<float>(gv, n, "g"), emu.Out<float>(mv, n, "m"),
                                        emu.Out<float>(vv, n, "v"), emu.Out<float>(wv, n, "w"), n});
  });
}

absl::Status EmulatedKernels::SumSquares(const float* x, int64_t n, double* partials,
                                         CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("SumSquares", n, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("SumSquares", kNormPartials, {partials}));
  void* xv = nullptr;
  if (n > 0) {
    LS_ASSIGN_OR_RETURN(xv, View(fake_, x, n, "SumSquares", "x"));
  }
  LS_ASSIGN_OR_RETURN(
      void* pv, Bytes(fake_, partials, kNormPartials * sizeof(double), "SumSquares", "partials"));
  const LaunchShape shape{std::min(kNormPartials, options_.max_blocks), options_.threads};
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "SumSquares", [=] {
    GridEmulator emu("SumSquares", seed);
    return emu.RunBlocks(shape,
                         SumSquaresKernel<A>{emu.In<float>(xv, n, "x"),
                                             emu.Out<double>(pv, kNormPartials, "partials"), n});
  });
}

absl::Status EmulatedKernels::ClipScale(const double* partials, int64_t count, double clipnorm,
                                        double* norm, float* scale, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("ClipScale", count, {partials}));
  LS_RETURN_IF_ERROR(CheckLaunch("ClipScale", 1, {norm, scale}));
  void* pv = nullptr;
  if (count > 0) {
    LS_ASSIGN_OR_RETURN(pv,
                        Bytes(fake_, partials, count * sizeof(double), "ClipScale", "partials"));
  }
  LS_ASSIGN_OR_RETURN(void* nv, Bytes(fake_, norm, sizeof(double), "ClipScale", "norm"));
  LS_ASSIGN_OR_RETURN(void* sv, View(fake_, scale, 1, "ClipScale", "scale"));
  const LaunchShape shape{1, options_.threads};
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "ClipScale", [=] {
    GridEmulator emu("ClipScale", seed);
    return emu.RunBlocks(
        shape, ClipScaleKernel<A>{emu.In<double>(pv, count, "partials"), count, clipnorm,
                                  emu.Out<double>(nv, 1, "norm"), emu.Out<float>(sv, 1, "scale")});
  });
}

absl::Status EmulatedKernels::ScaleByDevice(const float* x, const float* scale, float* y, int64_t n,
                                            CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("ScaleByDevice", n, {x, scale, y}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "ScaleByDevice", "x"));
  LS_ASSIGN_OR_RETURN(void* cv, View(fake_, scale, 1, "ScaleByDevice", "scale"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "ScaleByDevice", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "ScaleByDevice", [=] {
    GridEmulator emu("ScaleByDevice", seed);
    return emu.Run(shape,
                   ScaleByDeviceKernel<A>{emu.In<float>(xv, n, "x"), emu.In<float>(cv, 1, "scale"),
                                          emu.Out<float>(yv, n, "y"), n});
  });
}

absl::Status EmulatedKernels::BiasAdd(const float* x, const float* b, float* y, int64_t rows,
                                      int64_t cols, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("BiasAdd", rows, cols, {x, b, y}));
  const int64_t n = rows * cols;
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, x, n, "BiasAdd", "x"));
  LS_ASSIGN_OR_RETURN(void* bv, View(fake_, b, cols, "BiasAdd", "b"));
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, n, "BiasAdd", "y"));
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "BiasAdd", [=] {
    GridEmulator emu("BiasAdd", seed);
    return emu.Run(shape, BiasAddKernel<A>{emu.In<float>(xv, n, "x"), emu.In<float>(bv, cols, "b"),
                                           emu.Out<float>(yv, n, "y"), n, cols});
  });
}

absl::Status EmulatedKernels::ColumnSum(const float* x, float* y, int64_t rows, int64_t cols,
                                        CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("ColumnSum", rows, cols, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("ColumnSum", cols, {y}));
  if (cols == 0) return absl::OkStatus();
  const int64_t n = rows * cols;
  void* xv = nullptr;
  if (n > 0) {
    LS_ASSIGN_OR_RETURN(xv, View(fake_, x, n, "ColumnSum", "x"));
  }
  LS_ASSIGN_OR_RETURN(void* yv, View(fake_, y, cols, "ColumnSum", "y"));
  const LaunchShape shape = Elementwise(cols);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "ColumnSum", [=] {
    GridEmulator emu("ColumnSum", seed);
    return emu.Run(shape, ColumnSumKernel<A>{emu.In<float>(xv, n, "x"),
                                             emu.Out<float>(yv, cols, "y"), rows, cols});
  });
}

absl::Status EmulatedKernels::CheckLabels(const void* labels, bool labels_i64, int64_t* bad,
                                          int64_t rows, int64_t classes, CudaStream s) {
  const char* k = "CheckLabels";
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 1, {bad}));
  const size_t label_bytes = labels_i64 ? sizeof(int64_t) : sizeof(int32_t);
  void* lv = nullptr;
  if (rows > 0) {
    LS_ASSIGN_OR_RETURN(lv, Bytes(fake_, labels, rows * label_bytes, k, "labels"));
  }
  LS_ASSIGN_OR_RETURN(void* bv, Bytes(fake_, bad, sizeof(int64_t), k, "bad"));
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "LabelCheck", [=] {
    GridEmulator emu("LabelCheck", seed);
    if (labels_i64) {
      return emu.Run(kSingle,
                     LabelCheckKernel<A, int64_t>{emu.In<int64_t>(lv, rows, "labels"),
                                                  emu.Out<int64_t>(bv, 1, "bad"), rows, classes});
    }
    return emu.Run(kSingle,
                   LabelCheckKernel<A, int32_t>{emu.In<int32_t>(lv, rows, "labels"),
                                                emu.Out<int64_t>(bv, 1, "bad"), rows, classes});
  });
}

absl::Status EmulatedKernels::SoftmaxCrossEntropy(const float* logits, const void* labels,
                                                  bool labels_i64, double* terms, float* loss,
                                                  int64_t rows, int64_t classes, double eps,
                                                  CudaStream s) {
  const char* k = "SoftmaxCrossEntropy";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, classes, {logits}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels, terms}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 1, {loss}));
  const int64_t n = rows * classes;
  const size_t label_bytes = labels_i64 ? sizeof(int64_t) : sizeof(int32_t);
  void *xv = nullptr, *lv = nullptr, *tv = nullptr;
  if (rows > 0) {
    LS_ASSIGN_OR_RETURN(xv, View(fake_, logits, n, k, "logits"));
    LS_ASSIGN_OR_RETURN(lv, Bytes(fake_, labels, rows * label_bytes, k, "labels"));
    LS_ASSIGN_OR_RETURN(tv, Bytes(fake_, terms, rows * sizeof(double), k, "terms"));
  }
  LS_ASSIGN_OR_RETURN(void* outv, View(fake_, loss, 1, k, "loss"));
  if (rows > 0) {
    const LaunchShape shape = Elementwise(rows);
    const uint64_t seed = options_.seed + launches_++;
    LS_RETURN_IF_ERROR(fake_->Launch(s, "XentRows", [=] {
      GridEmulator emu("XentRows", seed);
      return RunLabelled<XentRowsKernel>(emu, shape, labels_i64, emu.In<float>(xv, n, "logits"), lv,
                                         rows, emu.Out<double>(tv, rows, "terms"), rows, classes,
                                         eps);
    }));
  }
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "XentTotal", [=] {
    GridEmulator emu("XentTotal", seed);
    return emu.Run(kSingle, XentTotalKernel<A>{emu.In<double>(tv, rows, "terms"),
                                               emu.Out<float>(outv, 1, "loss"), rows});
  });
}

absl::Status EmulatedKernels::SoftmaxCrossEntropyGrad(const float* logits, const void* labels,
                                                      bool labels_i64, const float* d_loss,
                                                      float* grad, int64_t rows, int64_t classes,
                                                      float eps, CudaStream s) {
  const char* k = "SoftmaxCrossEntropyGrad";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, classes, {logits, grad}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels, d_loss}));
  const int64_t n = rows * classes;
  if (n == 0) return absl::OkStatus();
  const size_t label_bytes = labels_i64 ? sizeof(int64_t) : sizeof(int32_t);
  LS_ASSIGN_OR_RETURN(void* xv, View(fake_, logits, n, k, "logits"));
  LS_ASSIGN_OR_RETURN(void* lv, Bytes(fake_, labels, rows * label_bytes, k, "labels"));
  LS_ASSIGN_OR_RETURN(void* dv, View(fake_, d_loss, 1, k, "d_loss"));
  LS_ASSIGN_OR_RETURN(void* gv, View(fake_, grad, n, k, "grad"));
  const LaunchShape shape = Elementwise(rows);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "XentGrad", [=] {
    GridEmulator emu("XentGrad", seed);
    return RunLabelled<XentGradKernel>(emu, shape, labels_i64, emu.In<float>(xv, n, "logits"), lv,
                                       rows, emu.In<float>(dv, 1, "d_loss"),
                                       emu.Out<float>(gv, n, "grad"), rows, classes, eps);
  });
}

absl::Status EmulatedKernels::Accuracy(const float* logits, const void* labels, bool labels_i64,
                                       int32_t* hits, float* rate, int64_t rows, int64_t classes,
                                       CudaStream s) {
  const char* k = "Accuracy";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, classes, {logits}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels, hits}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 1, {rate}));
  const int64_t n = rows * classes;
  const size_t label_bytes = labels_i64 ? sizeof(int64_t) : sizeof(int32_t);
  void *xv = nullptr, *lv = nullptr, *hv = nullptr;
  if (rows > 0) {
    LS_ASSIGN_OR_RETURN(xv, View(fake_, logits, n, k, "logits"));
    LS_ASSIGN_OR_RETURN(lv, Bytes(fake_, labels, rows * label_bytes, k, "labels"));
    LS_ASSIGN_OR_RETURN(hv, Bytes(fake_, hits, rows * sizeof(int32_t), k, "hits"));
  }
  LS_ASSIGN_OR_RETURN(void* rv, View(fake_, rate, 1, k, "rate"));
  if (rows > 0) {
    const LaunchShape shape = Elementwise(rows);
    const uint64_t seed = options_.seed + launches_++;
    LS_RETURN_IF_ERROR(fake_->Launch(s, "ArgmaxHits", [=] {
      GridEmulator emu("ArgmaxHits", seed);
      return RunLabelled<ArgmaxHitsKernel>(emu, shape, labels_i64, emu.In<float>(xv, n, "logits"),
                                           lv, rows, emu.Out<int32_t>(hv, rows, "hits"), rows,
                                           classes);
    }));
  }
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "HitRate", [=] {
    GridEmulator emu("HitRate", seed);
    return emu.Run(kSingle, HitRateKernel<A>{emu.In<int32_t>(hv, rows, "hits"),
                                             emu.Out<float>(rv, 1, "rate"), rows});
  });
}

}  // namespace lockstep::engine::gpu

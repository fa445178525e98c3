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
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Momentum", [=] {
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
  const LaunchShape shape = Elementwise(n);
  const uint64_t seed = options_.seed + launches_++;
  return fake_->Launch(s, "Adam", [=] {
    GridEmulator emu("Adam", seed);
    return emu.Run(shape, AdamKernel<A>{p, emu.In<float>(gv, n, "g"), emu.Out<float>(mv, n, "m"),
                                        emu.Out<float>(vv, n, "v"), emu.Out<float>(wv, n, "w"), n});
  });
}

}  // namespace lockstep::engine::gpu

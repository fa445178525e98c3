// EmulatedKernels' convolutional-model kernels (kernel_bodies_cnn.h) on the grid emulator, as
// emulated_kernels.cc runs the others: the launch checks, the buffers' host views in the fake's
// allocations, then the body enqueued on the stream with the launch's seed.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/kernels/gpu/emulated_kernels.h"
#include "engine/kernels/gpu/grid_emulator.h"
#include "engine/kernels/gpu/kernel_bodies_cnn.h"

namespace lockstep::engine::gpu {
namespace {

using A = EmulatedAccess;

// The fake's host view of `n` floats at `p` (null for none), which must lie in one allocation.
absl::StatusOr<void*> Floats(FakeCudaApi* fake, const char* kernel, const float* p, int64_t n,
                             const char* name) {
  if (n == 0) return nullptr;
  return fake->HostRange(p, static_cast<size_t>(n) * sizeof(float),
                         absl::StrCat("Launch(", kernel, ")"), name);
}

// The fake's host view of `n` doubles at `p` (null for none).
absl::StatusOr<void*> Doubles(FakeCudaApi* fake, const char* kernel, const double* p, int64_t n,
                              const char* name) {
  if (n == 0 || p == nullptr) return nullptr;
  return fake->HostRange(p, static_cast<size_t>(n) * sizeof(double),
                         absl::StrCat("Launch(", kernel, ")"), name);
}

// Enqueues run(emulator) on the stream as launch `kernel` (a string literal).
template <class Fn>
absl::Status EnqueueOn(FakeCudaApi* fake, CudaStream s, const char* kernel, uint64_t seed, Fn run) {
  return fake->Launch(s, kernel, [=] {
    GridEmulator emu(kernel, seed);
    return run(emu);
  });
}

// A buffer of a launch: `n` floats at device address `p`, called `name` in errors.
struct Floats1D {
  const float* p;
  int64_t n;
  const char* name;
};

// A window kernel K<A>{in, out, geometry} with one thread's work per element of `out`:
// the launch checks, the views, the body enqueued.
template <template <class> class K>
absl::Status WindowLaunch(FakeCudaApi* fake, CudaStream s, const char* kernel, uint64_t seed,
                          LaunchShape shape, const WindowGeometry& w, Floats1D in, Floats1D out) {
  LS_RETURN_IF_ERROR(CheckLaunch(kernel, in.n, {in.p}));
  LS_RETURN_IF_ERROR(CheckLaunch(kernel, out.n, {out.p}));
  if (out.n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* iv, Floats(fake, kernel, in.p, in.n, in.name));
  LS_ASSIGN_OR_RETURN(void* ov, Floats(fake, kernel, out.p, out.n, out.name));
  return EnqueueOn(fake, s, kernel, seed, [=](GridEmulator& emu) {
    return emu.Run(shape,
                   K<A>{emu.In<float>(iv, in.n, in.name), emu.Out<float>(ov, out.n, out.name), w});
  });
}

// The host views of BatchNormStatsKernel's buffers.
struct StatisticsViews {
  void *x, *moving_mean, *moving_variance, *stats;
};

// Enqueues the statistics of BatchNorm and BatchNormGrad (the same launch in both).
absl::Status EnqueueStatistics(FakeCudaApi* fake, CudaStream s, uint64_t seed, LaunchShape shape,
                               StatisticsViews v, const BatchNormDims& d, bool training,
                               float epsilon) {
  return EnqueueOn(fake, s, "BatchNormStats", seed, [=](GridEmulator& emu) {
    return emu.Run(shape,
                   BatchNormStatsKernel<A>{emu.In<float>(v.x, d.rows * d.c, "x"),
                                           emu.In<float>(v.moving_mean, d.c, "moving_mean"),
                                           emu.In<float>(v.moving_variance, d.c, "moving_variance"),
                                           emu.Out<float>(v.stats, d.groups * 3 * d.c, "stats"), d,
                                           training, epsilon});
  });
}

}  // namespace

absl::Status EmulatedKernels::Im2Col(const float* x, const WindowGeometry& w, float* cols,
                                     CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("Im2Col", w));
  const int64_t n = w.rows() * w.cols();
  return WindowLaunch<Im2ColKernel>(fake_, s, "Im2Col", options_.seed + launches_++, Elementwise(n),
                                    w, {x, w.input_size(), "x"}, {cols, n, "cols"});
}

absl::Status EmulatedKernels::Col2Im(const float* cols, const WindowGeometry& w, float* dx,
                                     CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("Col2Im", w));
  const int64_t n = w.input_size();
  return WindowLaunch<Col2ImKernel>(fake_, s, "Col2Im", options_.seed + launches_++, Elementwise(n),
                                    w, {cols, w.rows() * w.cols(), "cols"}, {dx, n, "dx"});
}

absl::Status EmulatedKernels::MaxPool(const float* x, const WindowGeometry& w, float* y,
                                      CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("MaxPool", w));
  const int64_t n = w.pooled_size();
  return WindowLaunch<MaxPoolKernel>(fake_, s, "MaxPool", options_.seed + launches_++,
                                     Elementwise(n), w, {x, w.input_size(), "x"}, {y, n, "y"});
}

absl::Status EmulatedKernels::MaxPoolGrad(const float* x, const WindowGeometry& w, const float* dy,
                                          float* dx, CudaStream s) {
  const char* k = "MaxPoolGrad";
  LS_RETURN_IF_ERROR(CheckWindow(k, w));
  const int64_t n_in = w.input_size(), n_out = w.pooled_size();
  LS_RETURN_IF_ERROR(CheckLaunch(k, n_in, {x, dx}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, n_out, {dy}));
  if (n_in == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n_in, "x"));
  LS_ASSIGN_OR_RETURN(void* dyv, Floats(fake_, k, dy, n_out, "dy"));
  LS_ASSIGN_OR_RETURN(void* dxv, Floats(fake_, k, dx, n_in, "dx"));
  const LaunchShape shape = Elementwise(n_in);
  return EnqueueOn(fake_, s, k, options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(
        shape, MaxPoolGradKernel<A>{emu.In<float>(xv, n_in, "x"), emu.In<float>(dyv, n_out, "dy"),
                                    emu.Out<float>(dxv, n_in, "dx"), w});
  });
}

absl::Status EmulatedKernels::BatchNorm(const float* x, const float* gamma, const float* beta,
                                        const float* moving_mean, const float* moving_variance,
                                        const BatchNormDims& d, bool training, float epsilon,
                                        float* stats, float* y, CudaStream s) {
  const char* k = "BatchNorm";
  LS_RETURN_IF_ERROR(CheckBatchNorm(k, d));
  const int64_t n = d.rows * d.c, ns = d.groups * 3 * d.c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, y}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.c, {gamma, beta, moving_mean, moving_variance}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, ns, {stats}));
  if (d.c == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n, "x"));
  LS_ASSIGN_OR_RETURN(void* gv, Floats(fake_, k, gamma, d.c, "gamma"));
  LS_ASSIGN_OR_RETURN(void* bv, Floats(fake_, k, beta, d.c, "beta"));
  LS_ASSIGN_OR_RETURN(void* mv, Floats(fake_, k, moving_mean, d.c, "moving_mean"));
  LS_ASSIGN_OR_RETURN(void* vv, Floats(fake_, k, moving_variance, d.c, "moving_variance"));
  LS_ASSIGN_OR_RETURN(void* sv, Floats(fake_, k, stats, ns, "stats"));
  LS_ASSIGN_OR_RETURN(void* yv, Floats(fake_, k, y, n, "y"));
  const LaunchShape per_channel = Elementwise(d.groups * d.c), per_element = Elementwise(n);
  LS_RETURN_IF_ERROR(EnqueueStatistics(fake_, s, options_.seed + launches_++, per_channel,
                                       {xv, mv, vv, sv}, d, training, epsilon));
  if (n == 0) return absl::OkStatus();
  return EnqueueOn(fake_, s, "BatchNormApply", options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(per_element, BatchNormApplyKernel<A>{
                                    emu.In<float>(xv, n, "x"), emu.In<float>(gv, d.c, "gamma"),
                                    emu.In<float>(bv, d.c, "beta"), emu.In<float>(sv, ns, "stats"),
                                    emu.Out<float>(yv, n, "y"), d});
  });
}

absl::Status EmulatedKernels::BatchNormMovingUpdates(const float* stats, const float* moving_mean,
                                                     const float* moving_variance,
                                                     const BatchNormDims& d, float momentum,
                                                     float* delta_mean, float* delta_variance,
                                                     CudaStream s) {
  const char* k = "BatchNormMovingUpdates";
  LS_RETURN_IF_ERROR(CheckBatchNorm(k, d));
  const int64_t ns = d.groups * 3 * d.c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, ns, {stats}));
  LS_RETURN_IF_ERROR(
      CheckLaunch(k, d.c, {moving_mean, moving_variance, delta_mean, delta_variance}));
  if (d.c == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* sv, Floats(fake_, k, stats, ns, "stats"));
  LS_ASSIGN_OR_RETURN(void* mv, Floats(fake_, k, moving_mean, d.c, "moving_mean"));
  LS_ASSIGN_OR_RETURN(void* vv, Floats(fake_, k, moving_variance, d.c, "moving_variance"));
  LS_ASSIGN_OR_RETURN(void* dmv, Floats(fake_, k, delta_mean, d.c, "delta_mean"));
  LS_ASSIGN_OR_RETURN(void* dvv, Floats(fake_, k, delta_variance, d.c, "delta_variance"));
  const LaunchShape channels = Elementwise(d.c);
  return EnqueueOn(
      fake_, s, "BatchNormMoving", options_.seed + launches_++, [=](GridEmulator& emu) {
        return emu.Run(
            channels,
            BatchNormMovingKernel<A>{
                emu.In<float>(sv, ns, "stats"), emu.In<float>(mv, d.c, "moving_mean"),
                emu.In<float>(vv, d.c, "moving_variance"), emu.Out<float>(dmv, d.c, "delta_mean"),
                emu.Out<float>(dvv, d.c, "delta_variance"), d, momentum});
      });
}

absl::Status EmulatedKernels::BatchNormGrad(const float* x, const float* dy, const float* gamma,
                                            const float* moving_mean, const float* moving_variance,
                                            const BatchNormDims& d, bool training, float epsilon,
                                            float* stats, float* sums, float* d_gamma,
                                            float* d_beta, float* dx, CudaStream s) {
  const char* k = "BatchNormGrad";
  LS_RETURN_IF_ERROR(CheckBatchNorm(k, d));
  const int64_t n = d.rows * d.c, ns = d.groups * 3 * d.c, nsum = d.groups * 2 * d.c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, dy}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.c, {gamma, moving_mean, moving_variance, d_gamma, d_beta}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, nsum, {stats, sums}));
  if (d.c == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n, "x"));
  LS_ASSIGN_OR_RETURN(void* dyv, Floats(fake_, k, dy, n, "dy"));
  LS_ASSIGN_OR_RETURN(void* gv, Floats(fake_, k, gamma, d.c, "gamma"));
  LS_ASSIGN_OR_RETURN(void* mv, Floats(fake_, k, moving_mean, d.c, "moving_mean"));
  LS_ASSIGN_OR_RETURN(void* vv, Floats(fake_, k, moving_variance, d.c, "moving_variance"));
  LS_ASSIGN_OR_RETURN(void* sv, Floats(fake_, k, stats, ns, "stats"));
  LS_ASSIGN_OR_RETURN(void* sumv, Floats(fake_, k, sums, nsum, "sums"));
  LS_ASSIGN_OR_RETURN(void* dgv, Floats(fake_, k, d_gamma, d.c, "d_gamma"));
  LS_ASSIGN_OR_RETURN(void* dbv, Floats(fake_, k, d_beta, d.c, "d_beta"));
  const LaunchShape per_channel = Elementwise(d.groups * d.c), per_element = Elementwise(n),
                    channels = Elementwise(d.c);
  void* dxv = nullptr;
  if (dx != nullptr) {
    LS_ASSIGN_OR_RETURN(dxv, Floats(fake_, k, dx, n, "dx"));
  }
  LS_RETURN_IF_ERROR(EnqueueStatistics(fake_, s, options_.seed + launches_++, per_channel,
                                       {xv, mv, vv, sv}, d, training, epsilon));
  LS_RETURN_IF_ERROR(
      EnqueueOn(fake_, s, "BatchNormSums", options_.seed + launches_++, [=](GridEmulator& emu) {
        return emu.Run(per_channel, BatchNormSumsKernel<A>{emu.In<float>(xv, n, "x"),
                                                           emu.In<float>(dyv, n, "dy"),
                                                           emu.In<float>(sv, ns, "stats"),
                                                           emu.Out<float>(sumv, nsum, "sums"), d});
      }));
  LS_RETURN_IF_ERROR(
      EnqueueOn(fake_, s, "BatchNormParams", options_.seed + launches_++, [=](GridEmulator& emu) {
        return emu.Run(channels, BatchNormParamsKernel<A>{emu.In<float>(sumv, nsum, "sums"),
                                                          emu.Out<float>(dgv, d.c, "d_gamma"),
                                                          emu.Out<float>(dbv, d.c, "d_beta"), d});
      }));
  if (dx == nullptr || n == 0) return absl::OkStatus();
  return EnqueueOn(fake_, s, "BatchNormInput", options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(per_element, BatchNormInputKernel<A>{
                                    emu.In<float>(xv, n, "x"), emu.In<float>(dyv, n, "dy"),
                                    emu.In<float>(gv, d.c, "gamma"), emu.In<float>(sv, ns, "stats"),
                                    emu.In<float>(sumv, nsum, "sums"), emu.Out<float>(dxv, n, "dx"),
                                    d, training});
  });
}

absl::Status EmulatedKernels::SyncBatchNormSum(const float* x, const double* mean, int64_t rows,
                                               int64_t c, double* sums, CudaStream s) {
  const char* k = "SyncBatchNormSum";
  const int64_t n = rows * c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {sums}));
  if (c == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n, "x"));
  LS_ASSIGN_OR_RETURN(void* mv, Doubles(fake_, k, mean, c, "mean"));
  LS_ASSIGN_OR_RETURN(void* sv, Doubles(fake_, k, sums, c, "sums"));
  const bool deviations = mean != nullptr;
  const LaunchShape channels = Elementwise(c);
  return EnqueueOn(fake_, s, k, options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(channels,
                   SyncBatchNormSumKernel<A>{emu.In<float>(xv, n, "x"),
                                             emu.In<double>(mv, deviations ? c : 0, "mean"),
                                             emu.Out<double>(sv, c, "sums"), rows, c, deviations});
  });
}

absl::Status EmulatedKernels::BatchNormApply(const float* x, const float* gamma, const float* beta,
                                             const float* stats, int64_t rows, int64_t c, float* y,
                                             CudaStream s) {
  const char* k = "BatchNormApply";
  const int64_t n = rows * c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, y}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {gamma, beta}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 3 * c, {stats}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n, "x"));
  LS_ASSIGN_OR_RETURN(void* gv, Floats(fake_, k, gamma, c, "gamma"));
  LS_ASSIGN_OR_RETURN(void* bv, Floats(fake_, k, beta, c, "beta"));
  LS_ASSIGN_OR_RETURN(void* sv, Floats(fake_, k, stats, 3 * c, "stats"));
  LS_ASSIGN_OR_RETURN(void* yv, Floats(fake_, k, y, n, "y"));
  BatchNormDims d;
  d.rows = rows, d.c = c, d.group_rows = rows;
  const LaunchShape per_element = Elementwise(n);
  return EnqueueOn(fake_, s, k, options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(per_element, BatchNormApplyKernel<A>{
                                    emu.In<float>(xv, n, "x"), emu.In<float>(gv, c, "gamma"),
                                    emu.In<float>(bv, c, "beta"), emu.In<float>(sv, 3 * c, "stats"),
                                    emu.Out<float>(yv, n, "y"), d});
  });
}

absl::Status EmulatedKernels::SyncBatchNormGradSums(const float* x, const float* dy,
                                                    const float* stats, int64_t rows, int64_t c,
                                                    double* sums, float* d_gamma, float* d_beta,
                                                    CudaStream s) {
  const char* k = "SyncBatchNormGradSums";
  const int64_t n = rows * c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, dy}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {stats, sums, d_gamma, d_beta}));
  if (c == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n, "x"));
  LS_ASSIGN_OR_RETURN(void* dyv, Floats(fake_, k, dy, n, "dy"));
  LS_ASSIGN_OR_RETURN(void* sv, Floats(fake_, k, stats, 3 * c, "stats"));
  LS_ASSIGN_OR_RETURN(void* sumv, Doubles(fake_, k, sums, 2 * c, "sums"));
  LS_ASSIGN_OR_RETURN(void* dgv, Floats(fake_, k, d_gamma, c, "d_gamma"));
  LS_ASSIGN_OR_RETURN(void* dbv, Floats(fake_, k, d_beta, c, "d_beta"));
  const LaunchShape channels = Elementwise(c);
  return EnqueueOn(fake_, s, k, options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(
        channels,
        SyncBatchNormGradSumsKernel<A>{
            emu.In<float>(xv, n, "x"), emu.In<float>(dyv, n, "dy"),
            emu.In<float>(sv, 3 * c, "stats"), emu.Out<double>(sumv, 2 * c, "sums"),
            emu.Out<float>(dgv, c, "d_gamma"), emu.Out<float>(dbv, c, "d_beta"), rows, c});
  });
}

absl::Status EmulatedKernels::SyncBatchNormInput(const float* x, const float* dy,
                                                 const float* gamma, const float* stats,
                                                 const float* means, int64_t rows, int64_t c,
                                                 float* dx, CudaStream s) {
  const char* k = "SyncBatchNormInput";
  const int64_t n = rows * c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, dy, dx}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {gamma, stats, means}));
  if (n == 0) return absl::OkStatus();
  LS_ASSIGN_OR_RETURN(void* xv, Floats(fake_, k, x, n, "x"));
  LS_ASSIGN_OR_RETURN(void* dyv, Floats(fake_, k, dy, n, "dy"));
  LS_ASSIGN_OR_RETURN(void* gv, Floats(fake_, k, gamma, c, "gamma"));
  LS_ASSIGN_OR_RETURN(void* sv, Floats(fake_, k, stats, 3 * c, "stats"));
  LS_ASSIGN_OR_RETURN(void* mv, Floats(fake_, k, means, 2 * c, "means"));
  LS_ASSIGN_OR_RETURN(void* dxv, Floats(fake_, k, dx, n, "dx"));
  const LaunchShape per_element = Elementwise(n);
  return EnqueueOn(fake_, s, k, options_.seed + launches_++, [=](GridEmulator& emu) {
    return emu.Run(per_element,
                   SyncBatchNormInputKernel<A>{
                       emu.In<float>(xv, n, "x"), emu.In<float>(dyv, n, "dy"),
                       emu.In<float>(gv, c, "gamma"), emu.In<float>(sv, 3 * c, "stats"),
                       emu.In<float>(mv, 2 * c, "means"), emu.Out<float>(dxv, n, "dx"), rows, c});
  });
}

}  // namespace lockstep::engine::gpu

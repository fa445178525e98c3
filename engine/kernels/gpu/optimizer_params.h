// The constants of one fused optimizer update (kernel_bodies.h), computed on the host exactly
// as Optimizer::Update<float> computes them (engine/optimizer.cc): in double from the spec and
// the step, then rounded to float once. Plain structs: passed by value to a kernel.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_OPTIMIZER_PARAMS_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_OPTIMIZER_PARAMS_H_

#include <cmath>
#include <cstdint>

namespace lockstep::engine::gpu {

// Global-norm clipping on the device (GpuKernels::SumSquares): the f64 partial sums each
// gradient contributes (a slice of the partials buffer ClipScale sums).
inline constexpr int kNormPartials = 64;

struct MomentumParams {
  float rate = 0;      // (float)lr
  float momentum = 0;  // (float)momentum
  bool nesterov = false;
  bool decay = false;           // weight decay applies to this variable
  float decay_rate = 0;         // (float)(lr * weight_decay)
  bool scale_gradient = false;  // global-norm clipping scaled the gradients this step
  float gradient_scale = 1;     // (float)(clipnorm / norm)
  // When set: the scale is read from this device float instead (ClipScale's, computed on
  // the device; gradient_scale is then ignored).
  const float* device_gradient_scale = nullptr;
};

struct AdamParams {
  float step = 0;  // (float)(lr * sqrt(1 - beta2^t) / (1 - beta1^t)), t = iterations + 1
  float beta1 = 0, beta2 = 0, epsilon = 0;
  bool decay = false;
  float decay_rate = 0;
  bool scale_gradient = false;
  float gradient_scale = 1;
  const float* device_gradient_scale = nullptr;  // as MomentumParams'
};

// `weight_decay` 0: none; `gradient_scale` 1: no clipping this step (as Optimizer::Apply).
inline MomentumParams MakeMomentumParams(double lr, double momentum, bool nesterov,
                                         double weight_decay, double gradient_scale) {
  MomentumParams p;
  p.rate = static_cast<float>(lr);
  p.momentum = static_cast<float>(momentum);
  p.nesterov = nesterov;
  p.decay = weight_decay > 0;
  p.decay_rate = static_cast<float>(lr * weight_decay);
  p.scale_gradient = gradient_scale != 1;
  p.gradient_scale = static_cast<float>(gradient_scale);
  return p;
}

// `t` is the update's number, iterations + 1.
inline AdamParams MakeAdamParams(double lr, double beta1, double beta2, double epsilon, int64_t t,
                                 double weight_decay, double gradient_scale) {
  AdamParams p;
  p.step = static_cast<float>(lr * std::sqrt(1 - std::pow(beta2, double(t))) /
                              (1 - std::pow(beta1, double(t))));
  p.beta1 = static_cast<float>(beta1);
  p.beta2 = static_cast<float>(beta2);
  p.epsilon = static_cast<float>(epsilon);
  p.decay = weight_decay > 0;
  p.decay_rate = static_cast<float>(lr * weight_decay);
  p.scale_gradient = gradient_scale != 1;
  p.gradient_scale = static_cast<float>(gradient_scale);
  return p;
}

// Clipping on the device (Optimizer::Apply on a GPU): the scale comes from ClipScale's output.
template <class Params>
Params WithDeviceGradientScale(Params p, const float* device_scale) {
  p.scale_gradient = true;
  p.device_gradient_scale = device_scale;
  return p;
}

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_OPTIMIZER_PARAMS_H_

// Optimizer: applies (already all-reduced) gradients to variables: SGD, Momentum (with
// Nesterov) and Adam, with a learning-rate schedule. Its state is tensors with stable
// names, so it checkpoints and broadcasts like variables:
//   "<variable>/momentum"                  Momentum
//   "<variable>/adam_m", "<variable>/adam_v"  Adam
//   "optimizer/iterations"                 i64 scalar, the number of updates applied
//
// Update rules (Keras semantics; lr = schedule.At(iterations)):
//   SGD       w -= lr * g
//   Momentum  v = mu * v - lr * g;  w += v                 (Nesterov: w += mu * v - lr * g)
//   Adam      m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  t = iterations + 1
//             w -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)
// Before the rule, in this order:
//   global_clipnorm c > 0   n = sqrt(sum over trainable variables of |g|^2) (in f64, in
//                           variable order); when n > c every g is scaled by c / n
//   weight_decay d > 0      w -= lr * d * w, decoupled from the gradient (AdamW with Adam),
//                           for trainable variables named by none of weight_decay_exclude
// A non-trainable variable's "gradient", when given, is a state update (batch norm's moving
// statistics, Executor::ComputeGradients): w += g, whatever the optimizer.
//
// On a GPU (Create's `gpu`): the slots live in the device's memory, variables and gradients
// must be on that device, and each update is one fused kernel per variable (GpuKernels:
// Axpy for SGD, Momentum, Adam, Add for state updates) enqueued on the device's stream, with
// the CPU's arithmetic (kernel_bodies.h), so a GPU step gives the CPU's bits. Clipping stays
// on the device: SumSquares per gradient into f64 partials, ClipScale sums them into the norm
// and the scale, which the update kernels read from device memory (no copy to the host, no
// synchronisation). Its f64 sum is a block tree, not the host's sequential order, so the norm
// may differ from the host's in the last bits (relative error below n * 2^-53 for n
// elements, both sums being of non-negative terms) and the f32 scale by at most one ulp
// when c / n lies that close to a rounding boundary; otherwise a GPU step is the CPU's bits.
// last_gradient_norm() reads the device's norm back when called. "optimizer/iterations"
// stays on the host. SaveState copies
// the slots to the host (and aborts, naming the device, if the device cannot: its context is
// then unusable); RestoreState copies them back.
//
// Ownership: owns its slot tensors; variables and gradients are the caller's; borrows `gpu`.
// Thread model: one thread at a time. Every element is updated independently, in order,
// so the result is bitwise reproducible.
#ifndef LOCKSTEP_ENGINE_OPTIMIZER_H_
#define LOCKSTEP_ENGINE_OPTIMIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gpu/gpu_device.h"
#include "engine/graph.h"
#include "engine/learning_rate.h"
#include "engine/tensor.h"
#include "lockstep/v1/model.pb.h"
#include "lockstep/v1/tensor.pb.h"

namespace lockstep::engine {

class Optimizer {
 public:
  // `variables` in the order gradients will come (Graph::Variables()). INVALID_ARGUMENT
  // naming the field for a bad spec (momentum outside [0, 1), no kind, bad schedule...).
  // `gpu`: the device the variables live on (null: the host); it must outlive the optimizer.
  // Errors from the device (allocating the slots) as AllocateTensor's.
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const v1::OptimizerSpec& spec,
                                                           std::vector<VariableInfo> variables,
                                                           const gpu::GpuDevice* gpu = nullptr);

  // Applies one update to every trainable variable with a valid gradient, then
  // increments iterations. INVALID_ARGUMENT (nothing changed) when counts, shapes,
  // dtypes or devices differ (on a GPU: f32 only); the device's errors on a GPU.
  absl::Status Apply(const std::vector<Tensor>& gradients, std::vector<Tensor>* variables);

  int64_t iterations() const;
  // With global_clipnorm: the global L2 norm of the gradients the last Apply received
  // (before clipping); 0 before the first, and without clipping. For summaries.
  // On a GPU: an 8-byte read back of the device's norm (synchronises; aborts naming the device
  // if it cannot, as SaveState).
  double last_gradient_norm() const;
  // The learning rate the next Apply will use.
  double learning_rate() const { return schedule_.At(iterations()); }

  // Slot tensors by index (stable order), e.g. for an in-place broadcast from the chief.
  int num_slots() const { return static_cast<int>(slots_.size()); }
  const std::string& slot_name(int k) const { return slot_names_[k]; }
  Tensor& slot(int k) { return slots_[k]; }

  // Slot tensors (see above), in a stable order.
  std::vector<v1::NamedTensor> SaveState() const;
  // INVALID_ARGUMENT naming the slot when one is missing or of another shape.
  absl::Status RestoreState(const std::vector<v1::NamedTensor>& state);

 private:
  Optimizer(v1::OptimizerSpec spec, LearningRateSchedule schedule,
            std::vector<VariableInfo> variables);
  template <typename T>
  void Update(int v, const Tensor& grad, Tensor* var, double lr, int64_t t, double grad_scale);
  static double GlobalNorm(const std::vector<Tensor>& gradients,
                           const std::vector<VariableInfo>& variables);
  // Apply's updates on the GPU (the checks done).
  absl::Status ApplyOnGpu(const std::vector<Tensor>& gradients, std::vector<Tensor>* variables,
                          double lr, int64_t t);
  // Enqueues the global norm and clip scale of `gradients` into clip_norm_ / clip_scale_.
  absl::Status ClipOnGpu(const std::vector<Tensor>& gradients);
  const gpu::GpuDevice* gpu_ = nullptr;

  v1::OptimizerSpec spec_;
  LearningRateSchedule schedule_;
  std::vector<VariableInfo> variables_;
  // slot_names_[k] names slots_[k]; the last is "optimizer/iterations".
  std::vector<std::string> slot_names_;
  std::vector<Tensor> slots_;
  std::vector<int> first_slot_;    // per variable, index of its first slot or -1
  std::vector<bool> decays_;       // per variable: weight decay applies
  double last_gradient_norm_ = 0;  // the host's
  // On a GPU with global_clipnorm: kNormPartials f64 per trainable variable, the norm (f64
  // scalar) and the scale (f32 scalar), all on the device.
  Tensor clip_partials_;
  Tensor clip_norm_;
  Tensor clip_scale_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OPTIMIZER_H_

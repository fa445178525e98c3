#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/gpu/device_tensor.h"
#include "engine/kernels/gpu/optimizer_params.h"

namespace lockstep::engine {
namespace {

constexpr char kIterations[] = "optimizer/iterations";

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer.", field, ": ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const v1::OptimizerSpec& spec,
                                                             std::vector<VariableInfo> variables,
                                                             const gpu::GpuDevice* gpu) {
  v1::OptimizerSpec s = spec;
  switch (s.kind_case()) {
    case v1::OptimizerSpec::kSgd:
      break;
    case v1::OptimizerSpec::kMomentum: {
      auto* m = s.mutable_momentum();
      if (m->momentum() == 0) m->set_momentum(0.9);
      if (!(m->momentum() > 0 && m->momentum() < 1)) {
        return Bad("momentum.momentum", absl::StrCat(m->momentum(), " is not in (0, 1)"));
      }
      break;
    }
    case v1::OptimizerSpec::kAdam: {
      auto* a = s.mutable_adam();
      if (a->beta1() == 0) a->set_beta1(0.9);
      if (a->beta2() == 0) a->set_beta2(0.999);
      if (a->epsilon() == 0) a->set_epsilon(1e-7);
      if (!(a->beta1() > 0 && a->beta1() < 1)) return Bad("adam.beta1", "must be in (0, 1)");
      if (!(a->beta2() > 0 && a->beta2() < 1)) return Bad("adam.beta2", "must be in (0, 1)");
      if (!(a->epsilon() > 0)) return Bad("adam.epsilon", "must be > 0");
      break;
    }
    default:
      return Bad("kind", "set one of sgd, momentum, adam");
  }
  if (!(s.global_clipnorm() >= 0) || std::isinf(s.global_clipnorm())) {
    return Bad("global_clipnorm", absl::StrCat(s.global_clipnorm(), " is not a norm >= 0"));
  }
  if (!(s.weight_decay() >= 0 && s.weight_decay() < 1)) {
    return Bad("weight_decay", absl::StrCat(s.weight_decay(), " is not in [0, 1)"));
  }
  if (s.gradient_accumulation_steps() < 0 || s.gradient_accumulation_steps() > 1024) {
    return Bad("gradient_accumulation_steps",
               absl::StrCat(s.gradient_accumulation_steps(), " is not in [0, 1024]"));
  }
  for (int i = 0; i < s.weight_decay_exclude_size(); ++i) {
    if (s.weight_decay_exclude(i).empty()) {
      return Bad(absl::StrCat("weight_decay_exclude[", i, "]"),
                 "is empty (it would exclude every variable)");
    }
  }
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(s.learning_rate());
  if (!schedule.ok()) {
    // The schedule names its field ("learning_rate.constant.value: ..."); under "optimizer."
    // it reads as the path in the spec, like the errors above.
    return absl::Status(schedule.status().code(),
                        absl::StrCat("optimizer.", schedule.status().message()));
  }
  std::unique_ptr<Optimizer> opt(new Optimizer(s, *schedule, std::move(variables)));
  if (gpu != nullptr) {
    for (const VariableInfo& v : opt->variables_) {
      if (v.trainable && v.dtype != DType::kF32) {
        return absl::InvalidArgumentError(absl::StrCat("optimizer on ", gpu->device().name(),
                                                       ": variable \"", v.name, "\" is ",
                                                       DTypeName(v.dtype), "; GPUs train f32"));
      }
    }
    opt->gpu_ = gpu;
    if (s.global_clipnorm() > 0) {  // the device's scratch for clipping (ClipOnGpu)
      int64_t trainable = 0;
      for (const VariableInfo& v : opt->variables_) trainable += v.trainable ? 1 : 0;
      LS_ASSIGN_OR_RETURN(
          opt->clip_partials_,
          gpu::AllocateTensor(*gpu->context, DType::kF64,
                              Shape{std::max<int64_t>(1, trainable) * gpu::kNormPartials}));
      LS_ASSIGN_OR_RETURN(opt->clip_norm_, gpu::ZerosOnDevice(*gpu->context, DType::kF64, Shape{}));
      LS_ASSIGN_OR_RETURN(opt->clip_scale_,
                          gpu::AllocateTensor(*gpu->context, DType::kF32, Shape{}));
    }
    for (size_t k = 0; k + 1 < opt->slots_.size(); ++k) {  // all but iterations
      const Tensor& host = opt->slots_[k];
      LS_ASSIGN_OR_RETURN(opt->slots_[k],
                          gpu::ZerosOnDevice(*gpu->context, host.dtype(), host.shape()));
    }
  }
  return opt;
}

Optimizer::Optimizer(v1::OptimizerSpec spec, LearningRateSchedule schedule,
                     std::vector<VariableInfo> variables)
    : spec_(std::move(spec)), schedule_(schedule), variables_(std::move(variables)) {
  std::vector<std::string> suffixes;
  if (spec_.has_momentum()) suffixes = {"momentum"};
  if (spec_.has_adam()) suffixes = {"adam_m", "adam_v"};
  for (const VariableInfo& v : variables_) {
    bool decays = v.trainable && spec_.weight_decay() > 0;
    for (const std::string& part : spec_.weight_decay_exclude()) {
      if (absl::StrContains(v.name, part)) decays = false;
    }
    decays_.push_back(decays);
    first_slot_.push_back(v.trainable && !suffixes.empty() ? static_cast<int>(slots_.size()) : -1);
    if (!v.trainable) continue;
    for (const std::string& suffix : suffixes) {
      slot_names_.push_back(absl::StrCat(v.name, "/", suffix));
      slots_.push_back(Tensor::Zeros(v.dtype, v.shape));
    }
  }
  slot_names_.push_back(kIterations);
  slots_.push_back(Tensor::Scalar<int64_t>(0));
}

int64_t Optimizer::iterations() const { return slots_.back().data<int64_t>()[0]; }

namespace {

// w += delta: a non-trainable variable's state update (batch norm's moving statistics).
template <typename T>
void AddState(const Tensor& delta, Tensor* var) {
  const T* d = delta.data<T>();
  T* w = var->data<T>();
  const int64_t n = var->num_elements();
  for (int64_t i = 0; i < n; ++i) w[i] += d[i];
}

}  // namespace

template <typename T>
void Optimizer::Update(int v, const Tensor& grad, Tensor* var, double lr, int64_t t,
                       double grad_scale) {
  const int64_t n = var->num_elements();
  const T* g = grad.data<T>();
  T* w = var->data<T>();
  const T rate = static_cast<T>(lr);
  if (decays_[v]) {
    const T decay = static_cast<T>(lr * spec_.weight_decay());
    for (int64_t i = 0; i < n; ++i) w[i] -= decay * w[i];
  }
  std::vector<T> clipped;
  if (grad_scale != 1) {
    clipped.resize(n);
    const T c = static_cast<T>(grad_scale);
    for (int64_t i = 0; i < n; ++i) clipped[i] = g[i] * c;
    g = clipped.data();
  }
  if (spec_.has_sgd()) {
    for (int64_t i = 0; i < n; ++i) w[i] -= rate * g[i];
  } else if (spec_.has_momentum()) {
    T* vel = slots_[first_slot_[v]].data<T>();
    const T mu = static_cast<T>(spec_.momentum().momentum());
    if (spec_.momentum().nesterov()) {
      for (int64_t i = 0; i < n; ++i) {
        vel[i] = mu * vel[i] - rate * g[i];
        w[i] += mu * vel[i] - rate * g[i];
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        vel[i] = mu * vel[i] - rate * g[i];
        w[i] += vel[i];
      }
    }
  } else {
    T* m = slots_[first_slot_[v]].data<T>();
    T* s = slots_[first_slot_[v] + 1].data<T>();
    const auto& a = spec_.adam();
    const T b1 = static_cast<T>(a.beta1()), b2 = static_cast<T>(a.beta2());
    const T eps = static_cast<T>(a.epsilon());
    const T step = static_cast<T>(lr * std::sqrt(1 - std::pow(a.beta2(), double(t))) /
                                  (1 - std::pow(a.beta1(), double(t))));
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (T(1) - b1) * g[i];
      s[i] = b2 * s[i] + (T(1) - b2) * g[i] * g[i];
      w[i] -= step * m[i] / (std::sqrt(s[i]) + eps);
    }
  }
}

absl::Status Optimizer::Apply(const std::vector<Tensor>& gradients,
                              std::vector<Tensor>* variables) {
  if (gradients.size() != variables_.size() || variables->size() != variables_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: ", variables_.size(), " variables, got ", variables->size(),
                     " variables and ", gradients.size(), " gradients"));
  }
  for (size_t v = 0; v < variables_.size(); ++v) {
    const VariableInfo& info = variables_[v];
    const Tensor& g = gradients[v];
    const Tensor& w = (*variables)[v];
    if (!w.valid() || w.dtype() != info.dtype || w.shape() != info.shape) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer: variable \"", info.name, "\" is ",
                                                     w.valid() ? w.DebugString() : "missing"));
    }
    if (g.valid() && (g.dtype() != info.dtype || g.shape() != info.shape)) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer: gradient of \"", info.name,
                                                     "\" is ", g.DebugString(), ", want ",
                                                     w.DebugString()));
    }
    // On the host any CPU device will do (they share memory); on a GPU, that GPU.
    auto placed = [&](const Tensor& t) {
      return gpu_ != nullptr ? t.device() == gpu_->device() : t.on_host();
    };
    if (!placed(w) || (g.valid() && !placed(g))) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer on ", gpu_ != nullptr ? gpu_->device().name() : "the host",
                       ": variable \"", info.name, "\" is on ", w.device().name(),
                       g.valid() ? ", its gradient on " : "", g.valid() ? g.device().name() : ""));
    }
  }
  const int64_t t = iterations();
  const double lr = schedule_.At(t);
  double grad_scale = 1;
  if (spec_.global_clipnorm() > 0 && gpu_ == nullptr) {
    last_gradient_norm_ = GlobalNorm(gradients, variables_);
    if (last_gradient_norm_ > spec_.global_clipnorm()) {
      grad_scale = spec_.global_clipnorm() / last_gradient_norm_;
    }
  }
  if (gpu_ != nullptr) {
    // A profiling run (GpuDevice::profiler): the update is a segment, then whatever the stream
    // does until the next step's work is outside the step.
    if (gpu_->profiler != nullptr) {
      LS_RETURN_IF_ERROR(
          gpu_->profiler->Mark("optimizer apply", "-", gpu::OpProfiler::Phase::kOther));
    }
    LS_RETURN_IF_ERROR(ApplyOnGpu(gradients, variables, lr, t + 1));
    if (gpu_->profiler != nullptr) {
      LS_RETURN_IF_ERROR(gpu_->profiler->Mark("outside the step (until the next step's work)", "-",
                                              gpu::OpProfiler::Phase::kOther));
    }
    slots_.back().data<int64_t>()[0] = t + 1;
    return absl::OkStatus();
  }
  for (size_t v = 0; v < variables_.size(); ++v) {
    if (!gradients[v].valid()) continue;
    if (!variables_[v].trainable) {  // a state update (Executor::ComputeGradients): added
      if (variables_[v].dtype == DType::kF32) {
        AddState<float>(gradients[v], &(*variables)[v]);
      } else {
        AddState<double>(gradients[v], &(*variables)[v]);
      }
      continue;
    }
    if (variables_[v].dtype == DType::kF32) {
      Update<float>(v, gradients[v], &(*variables)[v], lr, t + 1, grad_scale);
    } else {
      Update<double>(v, gradients[v], &(*variables)[v], lr, t + 1, grad_scale);
    }
  }
  slots_.back().data<int64_t>()[0] = t + 1;
  return absl::OkStatus();
}

absl::Status Optimizer::ClipOnGpu(const std::vector<Tensor>& gradients) {
  gpu::GpuKernels& k = *gpu_->kernels;
  const CudaStream s = gpu_->stream();
  double* partials = clip_partials_.device_data<double>();
  int64_t used = 0;
  for (size_t v = 0; v < variables_.size(); ++v) {
    if (!variables_[v].trainable || !gradients[v].valid()) continue;
    LS_RETURN_IF_ERROR(k.SumSquares(gradients[v].device_data<float>(), gradients[v].num_elements(),
                                    partials + used, s));
    used += gpu::kNormPartials;
  }
  // No gradient (used 0): norm 0, no clipping, as the host's empty sum.
  return k.ClipScale(partials, used, spec_.global_clipnorm(), clip_norm_.device_data<double>(),
                     clip_scale_.device_data<float>(), s);
}

double Optimizer::last_gradient_norm() const {
  if (gpu_ == nullptr || !clip_norm_.valid() || iterations() == 0) return last_gradient_norm_;
  // The device's norm of the last Apply: one 8-byte read back, only when asked (summaries).
  absl::StatusOr<Tensor> host = gpu::CopyToHost(*gpu_->context, clip_norm_);
  if (!host.ok()) {
    std::fprintf(stderr, "lockstep optimizer: reading the gradient norm from %s: %s\n",
                 gpu_->device().name().c_str(), host.status().ToString().c_str());
    std::abort();
  }
  return host->data<double>()[0];
}

absl::Status Optimizer::ApplyOnGpu(const std::vector<Tensor>& gradients,
                                   std::vector<Tensor>* variables, double lr, int64_t t) {
  gpu::GpuKernels& k = *gpu_->kernels;
  const CudaStream s = gpu_->stream();
  // With global_clipnorm the scale is computed on the device (ClipOnGpu) and every update
  // kernel reads it there: no copy to the host, no synchronisation.
  const bool clip = spec_.global_clipnorm() > 0;
  const float* device_scale = clip ? clip_scale_.device_data<float>() : nullptr;
  if (clip) LS_RETURN_IF_ERROR(ClipOnGpu(gradients));
  for (size_t v = 0; v < variables_.size(); ++v) {
    if (!gradients[v].valid()) continue;
    const float* g = gradients[v].device_data<float>();
    float* w = (*variables)[v].device_data<float>();
    const int64_t n = (*variables)[v].num_elements();
    if (!variables_[v].trainable) {  // a state update: w += delta
      LS_RETURN_IF_ERROR(k.Add(w, g, w, n, s));
      continue;
    }
    const double decay = decays_[v] ? spec_.weight_decay() : 0;
    if (spec_.has_momentum()) {
      const auto& m = spec_.momentum();
      gpu::MomentumParams p = gpu::MakeMomentumParams(lr, m.momentum(), m.nesterov(), decay, 1);
      if (clip) p = gpu::WithDeviceGradientScale(p, device_scale);
      LS_RETURN_IF_ERROR(k.Momentum(p, g, slots_[first_slot_[v]].device_data<float>(), w, n, s));
    } else if (spec_.has_adam()) {
      const auto& a = spec_.adam();
      gpu::AdamParams p = gpu::MakeAdamParams(lr, a.beta1(), a.beta2(), a.epsilon(), t, decay, 1);
      if (clip) p = gpu::WithDeviceGradientScale(p, device_scale);
      LS_RETURN_IF_ERROR(k.Adam(p, g, slots_[first_slot_[v]].device_data<float>(),
                                slots_[first_slot_[v] + 1].device_data<float>(), w, n, s));
    } else {  // SGD: decay (fmaf(-decay, w, w)), clipping, then w = fmaf(-rate, g, w)
      if (decay > 0) LS_RETURN_IF_ERROR(k.Axpy(-static_cast<float>(lr * decay), w, w, n, s));
      Tensor clipped;
      if (clip) {  // x * 1.0f when the norm is within the bound: the same bits as unclipped
        LS_ASSIGN_OR_RETURN(
            clipped, gpu::AllocateTensor(*gpu_->context, DType::kF32, (*variables)[v].shape()));
        LS_RETURN_IF_ERROR(k.ScaleByDevice(g, device_scale, clipped.device_data<float>(), n, s));
        g = clipped.device_data<float>();
      }
      LS_RETURN_IF_ERROR(k.Axpy(-static_cast<float>(lr), g, w, n, s));
    }
  }
  return absl::OkStatus();
}

double Optimizer::GlobalNorm(const std::vector<Tensor>& gradients,
                             const std::vector<VariableInfo>& variables) {
  double sum = 0;
  for (size_t v = 0; v < variables.size(); ++v) {
    if (!variables[v].trainable || !gradients[v].valid()) continue;
    const Tensor& g = gradients[v];
    const int64_t n = g.num_elements();
    if (g.dtype() == DType::kF32) {
      const float* x = g.data<float>();
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    } else {
      const double* x = g.data<double>();
      for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    }
  }
  return std::sqrt(sum);
}

std::vector<v1::NamedTensor> Optimizer::SaveState() const {
  std::vector<v1::NamedTensor> state;
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (slots_[k].on_host()) {
      state.push_back(slots_[k].ToNamedProto(slot_names_[k]));
      continue;
    }
    absl::StatusOr<Tensor> host = gpu::CopyToHost(*gpu_->context, slots_[k]);
    if (!host.ok()) {
      std::fprintf(stderr, "lockstep optimizer: saving slot %s from %s: %s\n",
                   slot_names_[k].c_str(), gpu_->device().name().c_str(),
                   host.status().ToString().c_str());
      std::abort();
    }
    state.push_back(host->ToNamedProto(slot_names_[k]));
  }
  return state;
}

absl::Status Optimizer::RestoreState(const std::vector<v1::NamedTensor>& state) {
  absl::flat_hash_map<std::string, const v1::NamedTensor*> by_name;
  for (const v1::NamedTensor& s : state) by_name[s.name()] = &s;
  std::vector<Tensor> restored;
  std::vector<Tensor> hosts;
  for (size_t k = 0; k < slots_.size(); ++k) {
    auto it = by_name.find(slot_names_[k]);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("restoring optimizer state: slot \"", slot_names_[k], "\" is missing"));
    }
    absl::StatusOr<Tensor> t = Tensor::FromProto(it->second->tensor());
    if (!t.ok())
      return Annotate(t.status(), absl::StrCat("restoring slot \"", slot_names_[k], "\""));
    if (t->dtype() != slots_[k].dtype() || t->shape() != slots_[k].shape()) {
      return absl::InvalidArgumentError(absl::StrCat("restoring slot \"", slot_names_[k],
                                                     "\": got ", t->DebugString(), ", want ",
                                                     slots_[k].DebugString()));
    }
    if (!slots_[k].on_host()) {
      // The copy is enqueued: its host source must live until the Synchronize below.
      hosts.push_back(*t);
      LS_ASSIGN_OR_RETURN(*t, gpu::CopyToDevice(*gpu_->context, hosts.back()));
    }
    restored.push_back(*std::move(t));
  }
  if (gpu_ != nullptr) LS_RETURN_IF_ERROR(gpu_->context->Synchronize());
  slots_ = std::move(restored);
  return absl::OkStatus();
}

}  // namespace lockstep::engine

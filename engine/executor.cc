#include "engine/executor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/gpu/device_tensor.h"
#include "engine/kernels/cpu/blas.h"
#include "engine/philox.h"

namespace lockstep::engine {
namespace {

// The floating dtype a node computes in: its first floating input's.
DType ComputeDType(const Graph& g, int i) {
  for (int in : g.node(i).inputs()) {
    if (g.dtype(in) == DType::kF32 || g.dtype(in) == DType::kF64) return g.dtype(in);
  }
  return g.dtype(i);
}

template <typename T>
void AddInto(const Tensor& a, const Tensor& b, Tensor* sum) {
  const T *x = a.data<T>(), *y = b.data<T>();
  T* z = sum->data<T>();
  // Hoisted: for all the compiler knows z's stores change the shape, which would keep the
  // loop scalar and call num_elements() per element.
  const int64_t n = a.num_elements();
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

}  // namespace

Executor::Executor(const Graph* graph, ExecutorOptions options)
    : graph_(graph), options_(options) {}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const Graph* graph,
                                                           ExecutorOptions options) {
  if (options.device.type() == Device::Type::kCuda) {
    if (options.gpu == nullptr || options.gpu->context == nullptr ||
        options.gpu->kernels == nullptr || options.gpu->blas == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("executor on ", options.device.name(),
                       ": ExecutorOptions::gpu must name the device's context, kernels and BLAS"));
    }
    if (options.gpu->device() != options.device) {
      return absl::InvalidArgumentError(absl::StrCat("executor on ", options.device.name(),
                                                     ": ExecutorOptions::gpu is ",
                                                     options.gpu->device().name()));
    }
  }
  std::unique_ptr<Executor> e(new Executor(graph, options));
  const int n = graph->num_nodes();
  e->variables_ = graph->Variables();
  e->variable_index_.assign(n, -1);
  for (int v = 0; v < static_cast<int>(e->variables_.size()); ++v) {
    e->variable_index_[e->variables_[v].node] = v;
  }
  e->kernels_.resize(n);
  e->needs_grad_.assign(n, false);
  for (int i = 0; i < n; ++i) {
    const v1::NodeDef& node = graph->node(i);
    if (node.op() == v1::INPUT || node.op() == v1::VARIABLE) {
      e->needs_grad_[i] = node.op() == v1::VARIABLE && node.trainable();
      continue;
    }
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel =
        graph->ops().CreateKernel(options.device.type(), node, ComputeDType(*graph, i));
    if (!kernel.ok())
      return Annotate(kernel.status(), absl::StrCat("device ", options.device.name()));
    e->kernels_[i] = *std::move(kernel);
    for (int in : node.inputs()) e->needs_grad_[i] = e->needs_grad_[i] || e->needs_grad_[in];
  }
  // A variable's gradient is final once its earliest consumer (on the way to the loss)
  // has run its backward step: nodes are processed in reverse order.
  e->gradient_final_after_.assign(e->variables_.size(), -1);
  if (graph->loss() >= 0) {
    std::vector<bool> to_loss = e->Ancestors({graph->loss()});
    for (int i = n - 1; i >= 0; --i) {
      if (!to_loss[i] || !e->needs_grad_[i]) continue;
      for (int in : graph->node(i).inputs()) {
        if (e->variable_index_[in] >= 0 && e->needs_grad_[in]) {
          e->gradient_final_after_[e->variable_index_[in]] = i;
        }
      }
    }
  }
  cpu::SetBlasThreads(options.blas_threads);
  return e;
}

std::vector<bool> Executor::Ancestors(std::vector<int> targets) const {
  std::vector<bool> mark(graph_->num_nodes(), false);
  for (int t : targets) {
    if (t >= 0) mark[t] = true;
  }
  for (int i = graph_->num_nodes() - 1; i >= 0; --i) {
    if (!mark[i]) continue;
    for (int in : graph_->node(i).inputs()) mark[in] = true;
  }
  return mark;
}

bool Executor::IsTrainableVariable(int node) const {
  const int v = variable_index_[node];
  return v >= 0 && variables_[v].trainable;
}

Tensor Executor::Allocate(DType dtype, const Shape& shape, bool gradient) {
  gradient = gradient && options_.gradient_allocator != nullptr && !OnGpu();
  const size_t bytes = shape.num_elements() * DTypeSize(dtype);
  for (PooledBuffer& b : pool_) {
    if (b.tensor.use_count() == 1 && b.gradient == gradient && b.tensor.dtype() == dtype &&
        b.tensor.num_bytes() == bytes) {
      absl::StatusOr<Tensor> reuse = b.tensor.Reshaped(shape);
      if (reuse.ok()) {
        b.last_run = run_;
        return *reuse;
      }
    }
  }
  Tensor fresh;
  if (OnGpu()) {
    absl::StatusOr<Tensor> t = gpu::AllocateTensor(*options_.gpu->context, dtype, shape);
    if (!t.ok()) {
      allocation_status_ = t.status();
      return Tensor();
    }
    fresh = *std::move(t);
  } else if (gradient) {
    std::shared_ptr<char> buffer = options_.gradient_allocator(bytes);
    if (buffer != nullptr) fresh = Tensor(dtype, shape, std::move(buffer), options_.device);
  }
  if (!fresh.valid()) fresh = Tensor(dtype, shape, options_.device);
  pool_.push_back(PooledBuffer{fresh, run_, gradient});
  return fresh;
}

absl::Status Executor::ReadResults(bool loss, bool accuracy, StepResult* result) {
  const int nodes[2] = {loss ? graph_->loss() : -1, accuracy ? graph_->accuracy() : -1};
  double* out[2] = {&result->loss, &result->accuracy};
  if (!OnGpu()) {
    for (int k = 0; k < 2; ++k) {
      if (nodes[k] >= 0) *out[k] = values_[nodes[k]].AsDouble(0);
    }
    return absl::OkStatus();
  }
  gpu::DeviceContext& context = *options_.gpu->context;
  for (int k = 0; k < 2; ++k) {
    if (nodes[k] < 0) continue;
    const Tensor& t = values_[nodes[k]];
    if (t.num_bytes() > 8) {
      return absl::InternalError(absl::StrCat("the step's result ", graph_->node(nodes[k]).name(),
                                              " is ", t.DebugString(), ", not a scalar"));
    }
    LS_RETURN_IF_ERROR(context.CopyToHost(readback_ + 8 * k, t.raw_device_data(), t.num_bytes()));
  }
  for (DeviceCheck& c : checks_) {
    LS_RETURN_IF_ERROR(context.CopyToHost(&c.value, c.flag.raw_device_data(), sizeof(int64_t)));
  }
  // The one wait of the step: its results, its device checks, and the host feeds' copies.
  LS_RETURN_IF_ERROR(context.Synchronize());
  std::vector<DeviceCheck> checks = std::move(checks_);
  checks_.clear();
  for (const DeviceCheck& c : checks) {
    if (c.value != 0) return c.explain(c.value);
  }
  for (int k = 0; k < 2; ++k) {
    if (nodes[k] < 0) continue;
    const Tensor& t = values_[nodes[k]];
    // A view of the bytes copied back, read as the tensor's dtype.
    Tensor host(t.dtype(), Shape{},
                std::shared_ptr<char>(std::shared_ptr<char>(), readback_ + 8 * k));
    *out[k] = host.AsDouble(0);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Executor::Sum(const Tensor& a, const Tensor& b, bool gradient) {
  Tensor sum = Allocate(a.dtype(), a.shape(), gradient);
  if (!sum.valid()) return allocation_status_;
  if (OnGpu()) {
    LS_RETURN_IF_ERROR(options_.gpu->kernels->Add(a.device_data<float>(), b.device_data<float>(),
                                                  sum.device_data<float>(), a.num_elements(),
                                                  options_.gpu->stream()));
  } else if (a.dtype() == DType::kF32) {
    AddInto<float>(a, b, &sum);
  } else {
    AddInto<double>(a, b, &sum);
  }
  return sum;
}

absl::StatusOr<Tensor> Executor::OnDevice(const Tensor& t, absl::string_view what) {
  // Every CPU device reads host memory; a GPU reads its own.
  if (OnGpu() ? t.device() == options_.device : t.on_host()) return t;
  if (OnGpu() && t.on_host()) return gpu::CopyToDevice(*options_.gpu->context, t);
  return absl::InvalidArgumentError(absl::StrCat(
      what, " is on ", t.device().name(), ", the executor runs on ", options_.device.name()));
}

void Executor::TrimPool() {
  ++run_;
  pool_.erase(std::remove_if(pool_.begin(), pool_.end(),
                             [&](const PooledBuffer& b) {
                               return b.tensor.use_count() == 1 && b.last_run < run_ - 1;
                             }),
              pool_.end());
}

KernelContext Executor::MakeContext(bool training, uint64_t dropout_key) {
  KernelContext ctx;
  ctx.allocate = [this](DType dtype, const Shape& shape) { return Allocate(dtype, shape); };
  ctx.training = training;
  ctx.dropout_key = dropout_key;
  ctx.precision = graph_->precision();
  ctx.gpu = OnGpu() ? options_.gpu : nullptr;
  checks_.clear();
  if (OnGpu()) {
    ctx.defer_device_check = [this](Tensor flag, std::function<absl::Status(int64_t)> explain) {
      checks_.push_back(DeviceCheck{std::move(flag), std::move(explain)});
    };
  }
  return ctx;
}

absl::Status Executor::Mark(absl::string_view name, absl::string_view op,
                            gpu::OpProfiler::Phase phase, bool call) {
  return marking_ == nullptr ? absl::OkStatus() : marking_->Mark(name, op, phase, call);
}

absl::Status Executor::Forward(const std::vector<Tensor>& variables, const Feeds& feeds,
                               const std::vector<bool>& wanted, const KernelContext& base_ctx) {
  const int n = graph_->num_nodes();
  values_.assign(n, Tensor());
  state_updates_.assign(variables_.size(), Tensor());
  allocation_status_ = absl::OkStatus();
  TrimPool();
  if (variables.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", variables_.size(),
                                                   " variables, ", variables.size(), " given"));
  }
  KernelContext ctx = base_ctx;
  for (int i = 0; i < n; ++i) {
    if (!wanted[i]) continue;
    const v1::NodeDef& node = graph_->node(i);
    if (node.op() == v1::VARIABLE) {
      const Tensor& v = variables[variable_index_[i]];
      if (!v.valid() || v.dtype() != graph_->dtype(i) || v.shape() != graph_->shape(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", node.name(), "\" is ", v.valid() ? v.DebugString() : "missing",
            ", the graph wants ", DTypeName(graph_->dtype(i)), graph_->shape(i).ToString()));
      }
      if (OnGpu() ? v.device() != options_.device : !v.on_host()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", node.name(), "\" is on ", v.device().name(), ", the executor runs on ",
            options_.device.name(), OnGpu() ? ": copy variables to it (gpu::CopyToDevice)" : ""));
      }
      values_[i] = v;
      continue;
    }
    if (node.op() == v1::INPUT) {
      auto it = std::find_if(feeds.begin(), feeds.end(),
                             [&](const auto& f) { return f.first == node.name(); });
      if (it == feeds.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("no tensor fed for input \"", node.name(), "\""));
      }
      const Tensor& t = it->second;
      Shape want = graph_->shape(i);
      bool ok = t.valid() && t.dtype() == graph_->dtype(i) && t.shape().rank() == want.rank();
      for (int d = 0; ok && d < want.rank(); ++d) {
        ok = want.dim(d) < 0 || want.dim(d) == t.shape().dim(d);
      }
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input \"", node.name(), "\" fed ", t.valid() ? t.DebugString() : "an empty tensor",
            ", the graph wants ", DTypeName(graph_->dtype(i)), want.ToString()));
      }
      LS_RETURN_IF_ERROR(
          Mark(node.name(), v1::OpType_Name(node.op()), gpu::OpProfiler::Phase::kForward));
      LS_ASSIGN_OR_RETURN(values_[i], OnDevice(t, absl::StrCat("input \"", node.name(), "\"")));
      continue;
    }
    std::vector<Tensor> inputs;
    for (int in : node.inputs()) inputs.push_back(values_[in]);
    ctx.node_index = i;
    if (ctx.training) {
      ctx.update_state = [this, &node](int input, Tensor delta) {
        const int v = variable_index_[node.inputs(input)];
        if (v >= 0 && !variables_[v].trainable) state_updates_[v] = std::move(delta);
      };
    }
    LS_RETURN_IF_ERROR(
        Mark(node.name(), v1::OpType_Name(node.op()), gpu::OpProfiler::Phase::kForward));
    absl::Status s = kernels_[i]->Forward(ctx, inputs, &values_[i]);
    if (!s.ok()) return allocation_status_.ok() ? s : allocation_status_;
  }
  return absl::OkStatus();
}

absl::Status Executor::Backward(const KernelContext& base_ctx, const StepOptions& options,
                                std::vector<Tensor>* gradients) {
  const int n = graph_->num_nodes();
  const int loss = graph_->loss();
  grads_.assign(n, Tensor());
  gradients->assign(variables_.size(), Tensor());
  LS_RETURN_IF_ERROR(Mark("executor: loss seed", "-", gpu::OpProfiler::Phase::kOther));
  Tensor seed = Allocate(graph_->dtype(loss), Shape{});
  if (!seed.valid()) return allocation_status_;
  if (OnGpu()) {  // seed_host_ lives until the step's synchronisation
    seed_host_ = static_cast<float>(options.loss_scale);
    LS_RETURN_IF_ERROR(
        options_.gpu->context->CopyToDevice(seed.raw_device_data(), &seed_host_, sizeof(float)));
  } else if (seed.dtype() == DType::kF32) {
    seed.data<float>()[0] = static_cast<float>(options.loss_scale);
  } else {
    seed.data<double>()[0] = options.loss_scale;
  }
  grads_[loss] = seed;
  // Variables whose gradient becomes final after node i.
  std::vector<std::vector<int>> final_after(n);
  for (int v = 0; v < static_cast<int>(variables_.size()); ++v) {
    if (gradient_final_after_[v] >= 0) final_after[gradient_final_after_[v]].push_back(v);
  }
  std::vector<bool> finished(variables_.size(), false);
  absl::Status device_status;  // the first device error of finish() / take()
  // on_gradient_ready, in a profiler segment of its own (the all-reduces it enqueues).
  auto hand_out = [&](int v) {
    if (!options.on_gradient_ready) return;
    if (marking_ != nullptr) {
      device_status.Update(
          marking_->Mark("gradient hand-off (all-reduce)", "-", gpu::OpProfiler::Phase::kOther));
    }
    options.on_gradient_ready(v);
    if (marking_ != nullptr) device_status.Update(marking_->Resume());
  };
  auto finish = [&](int v) {
    if (finished[v]) return;  // handed out early (take() below)
    finished[v] = true;
    Tensor& g = grads_[variables_[v].node];
    if (!g.valid() && OnGpu()) {
      absl::StatusOr<Tensor> z =
          gpu::ZerosOnDevice(*options_.gpu->context, variables_[v].dtype, variables_[v].shape);
      if (!z.ok()) {
        device_status.Update(z.status());
        return;
      }
      g = *std::move(z);
    }
    if (!g.valid()) g = Tensor::Zeros(variables_[v].dtype, variables_[v].shape);
    // The caller may all-reduce it in place: never hand out a buffer something else
    // (another gradient, a forward value) aliases. The pool's own reference is harmless:
    // the pool reuses a buffer only once nobody else holds it.
    const bool pooled = std::any_of(pool_.begin(), pool_.end(), [&](const PooledBuffer& p) {
      return p.tensor.address() == g.address();
    });
    if (g.use_count() > (pooled ? 2 : 1)) {
      Tensor copy = Allocate(g.dtype(), g.shape(), /*gradient=*/true);
      if (!copy.valid()) {
        device_status.Update(allocation_status_);
        return;
      }
      if (OnGpu()) {
        device_status.Update(options_.gpu->context->CopyOnDevice(
            copy.raw_device_data(), g.raw_device_data(), g.num_bytes()));
      } else {
        std::memcpy(copy.raw_data(), g.raw_data(), g.num_bytes());
      }
      g = copy;
    }
    (*gradients)[v] = std::move(g);
    g = Tensor();
    hand_out(v);
  };
  KernelContext ctx = base_ctx;
  int backward_node = loss;
  ctx.allocate_input_gradient = [&](int input, DType dtype, const Shape& shape) {
    const int from = graph_->node(backward_node).inputs(input);
    return Allocate(dtype, shape, IsTrainableVariable(from));
  };
  for (int i = loss; i >= 0; --i) {
    backward_node = i;
    const v1::NodeDef& node = graph_->node(i);
    if (grads_[i].valid() && kernels_[i] != nullptr && needs_grad_[i]) {
      const int k = node.inputs_size();
      std::vector<Tensor> inputs;
      std::vector<bool> need(k);
      for (int j = 0; j < k; ++j) {
        inputs.push_back(values_[node.inputs(j)]);
        need[j] = needs_grad_[node.inputs(j)];
      }
      std::vector<Tensor> d_inputs(k);
      std::vector<bool> taken(k, false);
      // Accumulates input j's gradient; when that input is a variable this node reads once
      // and last, its gradient is final: hand it out now.
      auto take = [&](int j) {
        if (taken[j] || !need[j] || !d_inputs[j].valid()) return;
        taken[j] = true;
        const int from = node.inputs(j);
        Tensor& acc = grads_[from];
        if (!acc.valid()) {
          acc = std::move(d_inputs[j]);
        } else {  // a second consumer: sum into a fresh buffer (inputs may alias)
          absl::StatusOr<Tensor> sum = Sum(acc, d_inputs[j], IsTrainableVariable(from));
          if (!sum.ok()) {
            device_status.Update(sum.status());
            return;
          }
          acc = *std::move(sum);
        }
        const int v = variable_index_[from];
        if (v >= 0 && gradient_final_after_[v] == i &&
            std::count(node.inputs().begin(), node.inputs().end(), from) == 1) {
          finish(v);
        }
      };
      ctx.node_index = i;
      ctx.input_gradient_done = take;
      LS_RETURN_IF_ERROR(
          Mark(node.name(), v1::OpType_Name(node.op()), gpu::OpProfiler::Phase::kBackward));
      absl::Status s = kernels_[i]->Backward(ctx, inputs, values_[i], grads_[i], need, &d_inputs);
      if (!s.ok()) return allocation_status_.ok() ? s : allocation_status_;
      ctx.input_gradient_done = nullptr;
      grads_[i] = Tensor();
      for (int j = 0; j < k; ++j) take(j);
    }
    for (int v : final_after[i]) finish(v);
    LS_RETURN_IF_ERROR(device_status);
  }
  LS_RETURN_IF_ERROR(Mark("executor: unused variables' zeros, state updates", "-",
                          gpu::OpProfiler::Phase::kOther));
  // Trainable variables the loss does not depend on get zero gradients.
  for (int v = 0; v < static_cast<int>(variables_.size()); ++v) {
    if (variables_[v].trainable && gradient_final_after_[v] < 0) finish(v);
  }
  LS_RETURN_IF_ERROR(device_status);
  // Then the state updates, scaled like the gradients (see ComputeGradients).
  for (int v = 0; v < static_cast<int>(variables_.size()); ++v) {
    Tensor& delta = state_updates_[v];
    if (!delta.valid()) continue;
    if (OnGpu()) {  // in place
      LS_RETURN_IF_ERROR(options_.gpu->kernels->Scale(
          delta.device_data<float>(), static_cast<float>(options.loss_scale),
          delta.device_data<float>(), delta.num_elements(), options_.gpu->stream()));
    }
    for (int64_t e = 0; !OnGpu() && e < delta.num_elements(); ++e) {
      if (delta.dtype() == DType::kF32) {
        delta.data<float>()[e] *= static_cast<float>(options.loss_scale);
      } else {
        delta.data<double>()[e] *= options.loss_scale;
      }
    }
    (*gradients)[v] = std::move(delta);
    delta = Tensor();
    hand_out(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Executor::ComputeGradients(const std::vector<Tensor>& variables,
                                                      const Feeds& feeds,
                                                      const StepOptions& options,
                                                      std::vector<Tensor>* gradients) {
  if (graph_->loss() < 0) {
    return absl::FailedPreconditionError("the graph has no loss node; cannot compute gradients");
  }
  const uint64_t dropout_key =
      MixKey(MixKey(graph_->seed(), static_cast<uint64_t>(options.replica_id)),
             static_cast<uint64_t>(options.step));
  KernelContext ctx = MakeContext(options.training, dropout_key);
  ctx.cross_replica_sum = options.cross_replica_sum;
  ctx.phantom_batch = options.phantom_batch;
  // Marks only in training steps: Evaluate's work stays in the segment outside the step.
  marking_ = OnGpu() ? options_.gpu->profiler : nullptr;
  if (marking_ != nullptr) marking_->BeginStep();
  StepResult result;
  absl::Status status = [&]() -> absl::Status {
    LS_RETURN_IF_ERROR(
        Forward(variables, feeds, Ancestors({graph_->loss(), graph_->accuracy()}), ctx));
    LS_RETURN_IF_ERROR(Backward(ctx, options, gradients));
    LS_RETURN_IF_ERROR(Mark("loss readback", "-", gpu::OpProfiler::Phase::kOther));
    LS_RETURN_IF_ERROR(ReadResults(/*loss=*/true, /*accuracy=*/true, &result));
    if (marking_ == nullptr) return absl::OkStatus();
    // The step's synchronisation has run every mark so far: read them, then open the segment
    // of whatever the caller enqueues next (the all-reduce wait, the loss's reduction).
    LS_RETURN_IF_ERROR(marking_->Harvest());
    return Mark("after the executor (all-reduce wait, loss reduction)", "-",
                gpu::OpProfiler::Phase::kOther);
  }();
  marking_ = nullptr;
  LS_RETURN_IF_ERROR(status);
  if (!feeds.empty() && feeds[0].second.shape().rank() > 0) {
    result.batch_size = feeds[0].second.shape().dim(0);
  }
  values_.assign(values_.size(), Tensor());
  return result;
}

absl::StatusOr<StepResult> Executor::Evaluate(const std::vector<Tensor>& variables,
                                              const Feeds& feeds, Tensor* output) {
  std::vector<int> targets = {graph_->output()};
  const int labels = graph_->FindInput("labels");
  bool have_labels = labels >= 0 && std::any_of(feeds.begin(), feeds.end(),
                                                [](const auto& f) { return f.first == "labels"; });
  if (have_labels) {
    targets.push_back(graph_->loss());
    targets.push_back(graph_->accuracy());
  }
  KernelContext ctx = MakeContext(/*training=*/false, 0);
  LS_RETURN_IF_ERROR(Forward(variables, feeds, Ancestors(targets), ctx));
  StepResult result;
  LS_RETURN_IF_ERROR(ReadResults(have_labels, have_labels, &result));
  if (!feeds.empty() && feeds[0].second.shape().rank() > 0) {
    result.batch_size = feeds[0].second.shape().dim(0);
  }
  if (output != nullptr && graph_->output() >= 0) {
    const Tensor& out = values_[graph_->output()];
    if (OnGpu()) {
      LS_ASSIGN_OR_RETURN(*output, gpu::CopyToHost(*options_.gpu->context, out));
    } else {
      *output = out.Clone();
    }
  }
  values_.assign(values_.size(), Tensor());
  // The feeds' host buffers are the caller's again once their copies have run.
  if (OnGpu()) LS_RETURN_IF_ERROR(options_.gpu->context->Synchronize());
  return result;
}

}  // namespace lockstep::engine

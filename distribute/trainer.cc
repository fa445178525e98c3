#include "distribute/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"
#include "engine/gpu/device_tensor.h"
#include "engine/variable_set.h"

namespace lockstep::distribute {

using engine::Tensor;

namespace {
// Step phases are timed on the monotonic clock.
using PhaseClock = std::chrono::steady_clock;
absl::Duration Since(PhaseClock::time_point start) {
  return absl::FromChrono(PhaseClock::now() - start);
}
}  // namespace

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(Strategy* strategy,
                                                         const engine::Graph* graph,
                                                         TrainerOptions options) {
  if (options.global_batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_batch_size must be positive, got ", options.global_batch_size));
  }
  const std::vector<engine::Device>& replicas = strategy->extended().worker_devices();
  const bool on_gpus = std::any_of(replicas.begin(), replicas.end(), [](const engine::Device& d) {
    return d.type() == engine::Device::Type::kCuda;
  });
  std::unique_ptr<Trainer> t(new Trainer(strategy, graph, std::move(options)));
  // Gradients reduce in place on the devices only over NCCL; other cross-device ops on GPU
  // replicas stage them through host memory (StrategyExtended::BatchReduceTo), so not overlapped.
  t->device_reduction_ = !on_gpus || strategy->extended().cross_device_ops().kind() ==
                                         CrossDeviceOpsKind::kNcclAllReduce;
  LS_ASSIGN_OR_RETURN(engine::VariableSet init, engine::VariableSet::Initialize(*graph));
  StrategyScope scope = strategy->Scope();
  for (int i = 0; i < init.size(); ++i) {
    LS_ASSIGN_OR_RETURN(DistributedVariable v, scope.CreateVariable(init.name(i), init.tensor(i)));
    t->variables_.push_back(std::move(v));
  }
  const std::vector<engine::Device>& devices = strategy->extended().worker_devices();
  for (size_t r = 0; r < devices.size(); ++r) {
    engine::ExecutorOptions eo;
    eo.device = devices[r];
    LS_ASSIGN_OR_RETURN(eo.gpu, strategy->extended().replica_gpu(static_cast<int>(r)));
    // Gradients where the all-reduce reads them in place, when the strategy has such memory.
    eo.gradient_allocator =
        strategy->extended().cross_device_ops().GradientAllocator(static_cast<int>(r));
    LS_ASSIGN_OR_RETURN(std::unique_ptr<engine::Executor> e, engine::Executor::Create(graph, eo));
    t->executors_.push_back(std::move(e));
  }
  const int copies = t->variables_.empty() ? 1 : t->variables_[0].num_copies();
  for (int c = 0; c < copies; ++c) {
    LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, strategy->extended().copy_gpu(c));
    LS_ASSIGN_OR_RETURN(std::unique_ptr<engine::Optimizer> o,
                        engine::Optimizer::Create(t->options_.optimizer, graph->Variables(), gpu));
    t->optimizers_.push_back(std::move(o));
  }
  LS_RETURN_IF_ERROR(t->ProbeGradientOrder());
  return t;
}

absl::Status Trainer::Restore(const v1::Checkpoint& checkpoint) {
  absl::flat_hash_map<std::string, const v1::NamedTensor*> by_name;
  for (const v1::NamedTensor& v : checkpoint.variables()) by_name[v.name()] = &v;
  std::vector<Tensor> values;
  for (DistributedVariable& v : variables_) {
    auto it = by_name.find(v.name());
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restoring variable \"", v.name(), "\": missing from the checkpoint of step ",
          checkpoint.global_step(), " (written for another model?)"));
    }
    absl::StatusOr<Tensor> t = Tensor::FromProto(it->second->tensor());
    if (!t.ok()) return Annotate(t.status(), absl::StrCat("restoring variable \"", v.name(), "\""));
    const Tensor& have = v.copy(0);
    if (t->dtype() != have.dtype() || t->shape() != have.shape()) {
      return absl::InvalidArgumentError(absl::StrCat("restoring variable \"", v.name(),
                                                     "\": the checkpoint has ", t->DebugString(),
                                                     ", the model ", have.DebugString()));
    }
    values.push_back(*std::move(t));
  }
  for (size_t i = 0; i < variables_.size(); ++i) {
    for (int c = 0; c < variables_[i].num_copies(); ++c) {
      Tensor& copy = variables_[i].copy(c);
      if (copy.on_host()) {
        if (values[i].num_bytes() > 0) {
          std::memcpy(copy.raw_data(), values[i].raw_data(), values[i].num_bytes());
        }
        continue;
      }
      LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, strategy_->extended().copy_gpu(c));
      absl::Status s = CopyInto(values[i], &copy, gpu);
      if (!s.ok())
        return Annotate(s, absl::StrCat("restoring variable \"", variables_[i].name(), "\""));
    }
  }
  const std::vector<v1::NamedTensor> slots(checkpoint.optimizer_slots().begin(),
                                           checkpoint.optimizer_slots().end());
  for (std::unique_ptr<engine::Optimizer>& o : optimizers_) {
    LS_RETURN_IF_ERROR(o->RestoreState(slots));
  }
  steps_ = checkpoint.global_step();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Trainer::HostVariables() const {
  std::vector<Tensor> out;
  for (const DistributedVariable& v : variables_) {
    LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, strategy_->extended().copy_gpu(0));
    absl::StatusOr<Tensor> host = ToHost(v.Read(0), gpu);
    if (!host.ok())
      return Annotate(host.status(), absl::StrCat("reading variable \"", v.name(), "\""));
    out.push_back(*std::move(host));
  }
  return out;
}

absl::StatusOr<engine::Feeds> Trainer::ZeroBatch() const {
  engine::Feeds feeds;
  for (const std::string& key : {options_.features_key, options_.labels_key}) {
    const int node = graph_->FindInput(key);
    if (node < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model has no input \"", key, "\" to feed"));
    }
    std::vector<int64_t> dims = graph_->shape(node).dims();
    for (int64_t& d : dims) d = d < 0 ? 1 : d;
    feeds.push_back({key, Tensor::Zeros(graph_->dtype(node), engine::Shape(dims))});
  }
  return feeds;
}

absl::Status Trainer::ProbeGradientOrder() {
  // One backward pass on a one-example batch of zeros records the hook's order.
  LS_ASSIGN_OR_RETURN(engine::Feeds feeds, ZeroBatch());
  LS_ASSIGN_OR_RETURN(std::vector<Tensor> vars,
                      strategy_->extended().ReadForReplica(variables_, 0));
  // A device tensor is only read by the backward pass; a host one is cloned as before.
  for (Tensor& v : vars) {
    if (v.on_host()) v = v.Clone();
  }
  engine::StepOptions step;
  step.on_gradient_ready = [this](int i) { gradient_order_.push_back(i); };
  std::vector<Tensor> grads;
  absl::Status s = executors_[0]->ComputeGradients(vars, feeds, step, &grads).status();
  if (!s.ok()) return Annotate(s, "probing the model's backward pass on a batch of zeros");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Trainer::ReplicaStep(ReplicaContext& ctx,
                                                         const std::vector<Tensor>& args,
                                                         bool overlap, bool request_stop) {
  const int r = ctx.local_replica_id();
  const int k = accumulation_steps_;
  // Its own copies, or the central values copied onto its device (the strategy decides).
  LS_ASSIGN_OR_RETURN(std::vector<Tensor> vars,
                      strategy_->extended().ReadForReplica(variables_, r));
  // Null on a CPU replica.
  LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, strategy_->extended().replica_gpu(r));
  StepTimes& times = replica_times_[r];
  // The first K-1 micro-batches' gradients, summed where they lie (host memory, or the
  // replica's device memory through its Add kernel), apart from the gradients themselves (the
  // executor may place them in the all-reduce's memory, which each backward pass reuses).
  std::vector<Tensor> accumulated;
  std::vector<Tensor> grads;
  std::unique_ptr<GradientReducer> reducer;
  double loss = 0;
  absl::Status status;
  for (int m = 0; m < k && status.ok(); ++m) {
    const Tensor& features = args[2 * m];
    engine::Feeds feeds = {{options_.features_key, features},
                           {options_.labels_key, args[2 * m + 1]}};
    const int64_t local_batch = features.shape().rank() > 0 ? features.shape().dim(0) : 0;
    const bool last = m == k - 1;
    engine::StepOptions step;
    step.replica_id = ctx.replica_id_in_sync_group();
    step.step = steps_ * k + m;
    step.loss_scale = static_cast<double>(local_batch) / (options_.global_batch_size * k);
    if (sums_over_replicas_ && ctx.num_replicas_in_sync() > 1) {
      step.cross_replica_sum = [&ctx](Tensor* values) {
        return ctx.AllReduceAsync(ReduceOp::kSum, values)->Wait();
      };
    }
    grads.clear();
    if (overlap && last) {
      reducer = ctx.MakeGradientReducer(ReduceOp::kSum);
      step.on_gradient_ready = [&](int i) {
        if (!grads[i].valid()) return;
        if (!accumulated.empty() && accumulated[i].valid()) {
          status.Update(AddInto(accumulated[i], &grads[i], gpu));
        }
        reducer->Add(&grads[i]);
      };
    }
    EnterPhase(StepPhase::kCompute, r);
    PhaseClock::time_point phase = PhaseClock::now();
    absl::StatusOr<engine::StepResult> result;
    if (local_batch == 0 && step.cross_replica_sum) {
      // A replica past the end of a partial batch, in a model whose kernels sum over the
      // replicas: a phantom batch makes the same collective calls, contributing nothing,
      // and its zero loss scale makes every gradient zero.
      step.phantom_batch = true;
      absl::StatusOr<engine::Feeds> phantom = ZeroBatch();
      if (!phantom.ok()) {
        result = phantom.status();
      } else {
        result = executors_[r]->ComputeGradients(vars, *phantom, step, &grads);
        if (result.ok()) result = engine::StepResult{};
      }
    } else if (local_batch == 0) {
      // A replica past the end of a partial batch: it contributes zero gradients.
      for (const Tensor& v : vars) {
        if (v.on_host()) {
          grads.push_back(Tensor::Zeros(v.dtype(), v.shape()));
          continue;
        }
        absl::StatusOr<Tensor> zeros =
            engine::gpu::ZerosOnDevice(*gpu->context, v.dtype(), v.shape());
        if (!zeros.ok()) {
          status.Update(zeros.status());
          break;
        }
        grads.push_back(*std::move(zeros));
      }
      if (step.on_gradient_ready) {
        for (int i : gradient_order_) step.on_gradient_ready(i);
      }
      result = engine::StepResult{};
    } else {
      result = executors_[r]->ComputeGradients(vars, feeds, step, &grads);
    }
    times.compute += Since(phase);
    status.Update(result.status());
    if (result.ok()) loss += result->loss * step.loss_scale;
    if (!status.ok() || last) break;
    if (accumulated.empty()) {
      for (size_t i = 0; i < grads.size() && status.ok(); ++i) {
        absl::StatusOr<Tensor> copy = CloneWhereItLies(grads[i], gpu);
        status.Update(copy.status());
        accumulated.push_back(copy.ok() ? *std::move(copy) : Tensor());
      }
    } else {
      for (size_t i = 0; i < grads.size() && status.ok(); ++i) {
        if (grads[i].valid() && accumulated[i].valid()) {
          status.Update(AddInto(grads[i], &accumulated[i], gpu));
        }
      }
    }
  }
  EnterPhase(StepPhase::kAllReduce, r);
  PhaseClock::time_point phase = PhaseClock::now();
  // Every started all-reduce must be waited for, even after an error (it writes into grads).
  if (reducer != nullptr) status.Update(reducer->Finish());
  times.allreduce_wait = Since(phase);
  if (!status.ok()) return status;
  if (!overlap && !accumulated.empty()) {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].valid() && accumulated[i].valid()) {
        LS_RETURN_IF_ERROR(AddInto(accumulated[i], &grads[i], gpu));
      }
    }
  }
  if (overlap) {
    EnterPhase(StepPhase::kApply, r);
    phase = PhaseClock::now();
    LS_RETURN_IF_ERROR(optimizers_[r]->Apply(grads, &vars));
    times.apply = Since(phase);
    grads.clear();  // applied here: nothing for the cross-replica path
  }
  // Output 0: this replica's share of the global mean loss and whether it asks to stop (summed
  // over the replicas, so any request is seen by all); then the gradients.
  Tensor head = Tensor::Zeros(DType::kF64, engine::Shape({2}));
  head.data<double>()[0] = loss;
  head.data<double>()[1] = request_stop ? 1.0 : 0.0;
  std::vector<Tensor> out = {std::move(head)};
  for (Tensor& g : grads) out.push_back(std::move(g));
  return out;
}

absl::StatusOr<TrainStepResult> Trainer::Step(const std::vector<DistributedValues>& inputs,
                                              bool request_stop) {
  return Step(absl::MakeConstSpan(&inputs, 1), request_stop);
}

absl::StatusOr<TrainStepResult> Trainer::Step(
    absl::Span<const std::vector<DistributedValues>> micro, bool request_stop) {
  if (static_cast<int>(micro.size()) != accumulation_steps_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Trainer::Step: optimizer.gradient_accumulation_steps is ",
                     accumulation_steps_, ", got ", micro.size(), " micro-batches"));
  }
  std::vector<RunArg> args;
  for (const std::vector<DistributedValues>& inputs : micro) {
    if (inputs.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trainer::Step takes {features, labels}, got ", inputs.size(), " values"));
    }
    args.push_back(inputs[0]);
    args.push_back(inputs[1]);
  }
  const bool overlap = options_.overlap_all_reduce && device_reduction_ && !variables_.empty() &&
                       variables_[0].kind() != DistributedVariable::Kind::kCentral;
  const PhaseClock::time_point start = PhaseClock::now();
  replica_times_.assign(strategy_->num_local_replicas(), StepTimes{});
  LS_ASSIGN_OR_RETURN(std::vector<DistributedValues> out,
                      strategy_->RunMulti(
                          [&](ReplicaContext& ctx, const std::vector<Tensor>& args) {
                            return ReplicaStep(ctx, args, overlap, request_stop);
                          },
                          args));
  TrainStepResult r;
  for (const StepTimes& t : replica_times_) r.times += t;
  const int replicas = static_cast<int>(replica_times_.size());
  r.times.compute /= replicas;
  r.times.allreduce_wait /= replicas;
  r.times.apply /= replicas;
  if (!overlap) {
    EnterPhase(StepPhase::kAllReduce);
    PhaseClock::time_point phase = PhaseClock::now();
    std::vector<DistributedValues> grads(out.begin() + 1, out.end());
    StrategyExtended& ext = strategy_->extended();
    LS_ASSIGN_OR_RETURN(std::vector<DistributedValues> reduced,
                        ext.BatchReduceTo(ReduceOp::kSum, grads, ext.variable_destination()));
    r.times.allreduce_wait += Since(phase);
    EnterPhase(StepPhase::kApply);
    phase = PhaseClock::now();
    std::vector<DistributedVariable*> vars;
    for (DistributedVariable& v : variables_) vars.push_back(&v);
    LS_RETURN_IF_ERROR(ext.Update(
        vars, reduced, [this](int copy, std::vector<Tensor>& v, const std::vector<Tensor>& g) {
          return optimizers_[copy]->Apply(g, &v);
        }));
    r.times.apply += Since(phase);
  }
  EnterPhase(StepPhase::kAllReduce);
  const PhaseClock::time_point loss_start = PhaseClock::now();
  LS_ASSIGN_OR_RETURN(Tensor loss, strategy_->Reduce(ReduceOp::kSum, out[0], kNoAxis));
  r.times.allreduce_wait += Since(loss_start);
  r.loss = loss.data<double>()[0];
  r.stop = loss.data<double>()[1] > 0;
  for (const std::vector<DistributedValues>& inputs : micro) {
    for (const Tensor& t : inputs[0].components()) r.examples += t.shape().dim(0);
  }
  ++steps_;
  r.times.total = Since(start);
  return r;
}

}  // namespace lockstep::distribute

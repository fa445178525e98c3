#include "distribute/strategy.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"
#include "spdlog/spdlog.h"

namespace lockstep::distribute {

using engine::Tensor;

// ---- StrategyScope ----

StrategyScope::StrategyScope(Strategy* strategy) : strategy_(strategy) {
  strategy_->scope_depth_.fetch_add(1);
}

StrategyScope::~StrategyScope() {
  if (strategy_ != nullptr) strategy_->scope_depth_.fetch_sub(1);
}

StrategyScope::StrategyScope(StrategyScope&& other) noexcept : strategy_(other.strategy_) {
  other.strategy_ = nullptr;
}

absl::StatusOr<DistributedVariable> StrategyScope::CreateVariable(std::string name,
                                                                  const Tensor& initial) {
  if (strategy_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("variable '", name, "' created through a StrategyScope that was moved from"));
  }
  if (!initial.valid()) {
    return absl::InvalidArgumentError(absl::StrCat("variable '", name, "': null initial value"));
  }
  if (!initial.on_host()) {
    return absl::InvalidArgumentError(absl::StrCat("variable '", name, "': the initial value ",
                                                   initial.DebugString(), " must be on the host"));
  }
  Tensor value = HostCopy(initial, engine::Device::Cpu(0));
  absl::Status s = strategy_->BroadcastFromChief(&value);
  if (!s.ok()) {
    return Annotate(s, absl::StrCat("broadcasting the chief's initial value of variable '", name,
                                    "' to worker ", strategy_->worker_index()));
  }
  const auto& cfg = strategy_->config_;
  if (cfg.variable_kind == DistributedVariable::Kind::kCentral) {
    return DistributedVariable::Central(std::move(name), std::move(value),
                                        static_cast<int>(cfg.devices.size()));
  }
  std::vector<Tensor> copies;
  for (size_t r = 0; r < cfg.devices.size(); ++r) {
    const std::string where =
        absl::StrCat("placing variable '", name, "' on ", cfg.devices[r].name());
    absl::StatusOr<const engine::gpu::GpuDevice*> gpu =
        strategy_->extended().replica_gpu(static_cast<int>(r));
    if (!gpu.ok()) return Annotate(gpu.status(), where);
    absl::StatusOr<Tensor> copy = CopyToDevice(value, cfg.devices[r], *gpu);
    if (!copy.ok()) return Annotate(copy.status(), where);
    copies.push_back(*std::move(copy));
  }
  return DistributedVariable(DistributedVariable::Kind::kMirrored, std::move(name),
                             std::move(copies));
}

// ---- Strategy ----

Strategy::Strategy(StrategyConfig config) : config_(std::move(config)) {
  if (num_local_replicas() > 1) {
    replica_threads_ = std::make_unique<ReplicaThreads>(num_local_replicas());
  }
}

Strategy::~Strategy() = default;

void Strategy::Abort() { config_.cross_device_ops->Abort(); }

void Strategy::PeerLost(int rank, const std::string& reason) {
  config_.cross_device_ops->PeerLost(rank, reason);
}

absl::StatusOr<Tensor> Strategy::OnHost(const Tensor& t, int local_replica) const {
  if (t.on_host()) return t;
  LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, extended_.replica_gpu(local_replica));
  return ToHost(t, gpu);
}

absl::Status Strategy::BroadcastFromChief(Tensor* t) {
  if (config_.cross_worker == nullptr) return absl::OkStatus();
  if (!t->on_host()) {
    // A device tensor (optimizer state on a GPU replica): staged through host memory.
    const engine::gpu::GpuDevice* gpu =
        config_.gpus == nullptr ? nullptr : config_.gpus->Find(t->device().index());
    LS_ASSIGN_OR_RETURN(Tensor host, ToHost(*t, gpu));
    host = HostCopy(host, engine::Device::Cpu(0));
    LS_RETURN_IF_ERROR(config_.cross_worker->Broadcast(host.raw_data(), host.num_elements(),
                                                       host.dtype(),
                                                       /*root=*/0, Deadline()));
    return CopyInto(host, t, gpu);
  }
  return config_.cross_worker->Broadcast(t->raw_data(), t->num_elements(), t->dtype(), /*root=*/0,
                                         Deadline());
}

absl::StatusOr<DistributedValues> Strategy::CheckLocal(const RunArg& value,
                                                       const char* what) const {
  if (!value.distributed()) {
    return DistributedValues::Mirrored(std::vector<Tensor>(num_local_replicas(), value.tensor()));
  }
  const DistributedValues& v = value.values();
  if (v.num_components() != num_local_replicas()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a ", v.is_mirrored() ? "Mirrored" : "PerReplica", " value with ",
                     v.num_components(), " components, but ", name(), " has ", num_local_replicas(),
                     " local replicas; was it made by another strategy?"));
  }
  for (int r = 0; r < v.num_components(); ++r) {
    if (!v.component(r).valid()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": component ", r, " is null"));
    }
  }
  return v;
}

absl::StatusOr<std::vector<DistributedValues>> Strategy::RunMulti(const ReplicaFn& fn,
                                                                  const std::vector<RunArg>& args) {
  const int n = num_local_replicas();
  std::vector<DistributedValues> local_args;
  for (size_t a = 0; a < args.size(); ++a) {
    absl::StatusOr<DistributedValues> v =
        CheckLocal(args[a], absl::StrCat("Run argument ", a).c_str());
    if (!v.ok()) return v.status();
    local_args.push_back(std::move(*v));
  }
  std::vector<absl::StatusOr<std::vector<Tensor>>> results(n);
  auto run_replica = [&](int r) {
    std::vector<Tensor> replica_args;
    for (const DistributedValues& v : local_args) replica_args.push_back(v.component(r));
    const engine::Device& device = config_.devices[r];
    ReplicaContext ctx(config_.worker_index * n + r, r, num_replicas_in_sync(), device,
                       config_.cross_device_ops.get(), config_.communication.timeout,
                       config_.gpus != nullptr && device.type() == engine::Device::Type::kCuda
                           ? config_.gpus->Find(device.index())
                           : nullptr);
    results[r] = fn(ctx, replica_args);
    // A failed replica would leave the others waiting in their all-reduces: end them.
    if (!results[r].ok() && n > 1) config_.cross_device_ops->Abort();
  };
  if (running_.exchange(true)) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(),
                     ": Run called while another Run is in flight (from inside a replica function, "
                     "or from a second thread); a replica function must not call Run"));
  }
  if (replica_threads_ == nullptr) {
    run_replica(0);
  } else {
    replica_threads_->Run(run_replica);
  }
  running_.store(false);
  // Report the first replica error that is not the consequence of another's abort.
  for (int r = 0; r < n; ++r) {
    if (!results[r].ok() && !absl::IsAborted(results[r].status())) {
      return Annotate(results[r].status(),
                      absl::StrCat(name(), " replica ", config_.worker_index * n + r, " on ",
                                   config_.devices[r].name()));
    }
  }
  for (int r = 0; r < n; ++r) {
    if (!results[r].ok()) {
      return Annotate(results[r].status(),
                      absl::StrCat(name(), " replica ", config_.worker_index * n + r, " on ",
                                   config_.devices[r].name()));
    }
  }
  const size_t outputs = results[0]->size();
  std::vector<std::vector<Tensor>> per_output(outputs);
  for (int r = 0; r < n; ++r) {
    if (results[r]->size() != outputs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Run: replica ", r, " returned ", results[r]->size(), " outputs but replica 0 returned ",
          outputs, "; every replica must return the same structure"));
    }
    for (size_t o = 0; o < outputs; ++o) per_output[o].push_back((*results[r])[o]);
  }
  std::vector<DistributedValues> out;
  for (auto& values : per_output) out.push_back(DistributedValues::PerReplica(std::move(values)));
  return out;
}

absl::StatusOr<DistributedValues> Strategy::Run(const SingleOutputFn& fn,
                                                const std::vector<RunArg>& args) {
  LS_ASSIGN_OR_RETURN(
      std::vector<DistributedValues> out,
      RunMulti(
          [&fn](ReplicaContext& ctx,
                const std::vector<Tensor>& a) -> absl::StatusOr<std::vector<Tensor>> {
            LS_ASSIGN_OR_RETURN(Tensor t, fn(ctx, a));
            return std::vector<Tensor>{std::move(t)};
          },
          args));
  return std::move(out[0]);
}

absl::StatusOr<Tensor> Strategy::Reduce(ReduceOp op, const RunArg& value, ReduceAxis axis) {
  if (axis.has_value() && *axis != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Reduce over axis ", *axis, " is not supported: use axis 0 (the batch) or none"));
  }
  if (!value.distributed()) {
    const Tensor& t = value.tensor();
    if (!t.valid()) return absl::InvalidArgumentError("Reduce: null tensor");
    if (op == ReduceOp::kSum && num_replicas_in_sync() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reduce(SUM) of a non-distributed value (", t.DebugString(), ") over ",
                       num_replicas_in_sync(),
                       " replicas: it would be counted once per replica; pass the "
                       "PerReplica value returned by Run, or use MEAN"));
    }
    if (!t.on_host()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reduce of a plain tensor on ", t.device().name(),
                       ": pass the PerReplica value returned by Run, or a host tensor"));
    }
    if (!axis.has_value()) return HostCopy(t, engine::Device::Cpu(0));
    LS_ASSIGN_OR_RETURN(Tensor sum, SumAxis0(t));
    if (op == ReduceOp::kMean) LS_RETURN_IF_ERROR(DivideBy(t.shape().dim(0), &sum));
    return sum;
  }
  LS_ASSIGN_OR_RETURN(DistributedValues local, CheckLocal(value, "Reduce"));
  if (!axis.has_value()) {
    for (int r = 1; r < local.num_components(); ++r) {
      const Tensor& t = local.component(r);
      const Tensor& first = local.component(0);
      if (t.shape() != first.shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Reduce with axis none: replica ", r, " has shape ", t.shape().ToString(),
            " but replica 0 has ", first.shape().ToString(),
            " (a partial last batch?); reduce with axis 0 to combine the batch dimension"));
      }
    }
    LS_ASSIGN_OR_RETURN(DistributedValues out, extended_.ReduceTo(op, local, Destination::kHost));
    return out.component(0);
  }
  // axis 0: sum every replica's batch, count the elements, then across workers.
  Tensor sum;
  int64_t count = 0;
  for (int r = 0; r < local.num_components(); ++r) {
    LS_ASSIGN_OR_RETURN(Tensor component, OnHost(local.component(r), r));
    LS_ASSIGN_OR_RETURN(Tensor partial, SumAxis0(component));
    count += local.component(r).shape().dim(0);
    if (r == 0) {
      sum = HostCopy(partial, engine::Device::Cpu(0));
    } else if (absl::Status s = AddInto(partial, &sum); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reduce over axis 0: replica ", r, "'s value ",
                       local.component(r).DebugString(), " does not match replica 0's ",
                       local.component(0).DebugString(), " beyond the batch dimension"));
    }
  }
  Tensor total = Tensor::Scalar<int64_t>(count);
  LS_RETURN_IF_ERROR(config_.cross_device_ops->CrossWorkerSum({&sum, &total}, Deadline()));
  if (op == ReduceOp::kMean) {
    const int64_t n = total.data<int64_t>()[0];
    if (n == 0) {
      return absl::InvalidArgumentError("Reduce(MEAN) over axis 0 of an empty batch");
    }
    LS_RETURN_IF_ERROR(DivideBy(static_cast<double>(n), &sum));
  }
  return sum;
}

std::vector<Tensor> Strategy::ExperimentalLocalResults(const DistributedValues& value) const {
  return value.components();
}

std::vector<Tensor> Strategy::ExperimentalLocalResults(const DistributedVariable& value) const {
  return value.copies();
}

std::vector<Tensor> Strategy::ExperimentalLocalResults(const Tensor& value) const {
  return {value};
}

absl::StatusOr<DistributedValues> Strategy::DistributeValuesFromFunction(
    const std::function<absl::StatusOr<Tensor>(const ValueContext&)>& fn) {
  std::vector<Tensor> values;
  const int n = num_local_replicas();
  for (int r = 0; r < n; ++r) {
    ValueContext ctx{config_.worker_index * n + r, num_replicas_in_sync()};
    absl::StatusOr<Tensor> v = fn(ctx);
    if (!v.ok()) {
      return Annotate(v.status(), absl::StrCat("DistributeValuesFromFunction, replica ",
                                               ctx.replica_id_in_sync_group));
    }
    if (!v->on_host()) {
      return absl::InvalidArgumentError(
          absl::StrCat("DistributeValuesFromFunction, replica ", ctx.replica_id_in_sync_group,
                       ": the function must return a host tensor, got ", v->DebugString()));
    }
    // Host-side per-replica values (a GPU replica's executor copies its inputs in).
    values.push_back(HostCopy(*v, config_.devices[r]));
  }
  return DistributedValues::PerReplica(std::move(values));
}

std::vector<engine::gpu::DeviceContext*> Strategy::StagingContexts(
    const DistributeOptions& options) const {
  std::vector<engine::gpu::DeviceContext*> contexts(config_.devices.size(), nullptr);
  for (size_t r = 0; r < contexts.size() && options.prefetch_to_device; ++r) {
    absl::StatusOr<const engine::gpu::GpuDevice*> gpu =
        GpuDeviceSet::ForReplica(config_.gpus.get(), config_.devices[r]);
    // Without handles the replica's step fails naming its device; its input stays on the host.
    if (gpu.ok() && *gpu != nullptr) contexts[r] = (*gpu)->context;
  }
  return contexts;
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::ExperimentalDistributeDataset(
    const DatasetSource& source, int64_t global_batch_size, DistributeOptions options) {
  InputContext ctx(num_workers(), worker_index(), num_replicas_in_sync());
  LS_ASSIGN_OR_RETURN(int64_t per_replica, ctx.GetPerReplicaBatchSize(global_batch_size));
  LS_ASSIGN_OR_RETURN(ShardPlan plan,
                      ResolveAutoShard(options.auto_shard_policy, source.files, num_workers(),
                                       worker_index(), source.num_files));
  if (options.auto_shard_policy == AutoShardPolicy::kAuto && num_workers() > 1) {
    if (plan.policy == AutoShardPolicy::kData) {
      spdlog::warn("{} worker {}: {}", name(), worker_index(), plan.reason);
    } else {
      spdlog::info("{} worker {}: {}", name(), worker_index(), plan.reason);
    }
  }
  if (!source.make) return absl::InvalidArgumentError("DatasetSource without a make function");
  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> it,
                      source.make(plan.spec, per_replica * num_local_replicas()));
  return std::make_unique<DistributedDataset>(
      std::move(it), DistributedDataset::Mode::kSplitBatches, config_.devices, per_replica,
      std::move(plan), options.prefetch < 0 ? num_local_replicas() : options.prefetch,
      options.start_step, StagingContexts(options));
}

absl::StatusOr<std::unique_ptr<DistributedDataset>> Strategy::DistributeDatasetsFromFunction(
    const std::function<absl::StatusOr<std::unique_ptr<BatchIterator>>(const InputContext&)>& fn,
    DistributeOptions options) {
  InputContext ctx(num_workers(), worker_index(), num_replicas_in_sync());
  absl::StatusOr<std::unique_ptr<BatchIterator>> it = fn(ctx);
  if (!it.ok()) {
    return Annotate(it.status(),
                    absl::StrCat("DistributeDatasetsFromFunction on worker ", worker_index()));
  }
  ShardPlan plan;
  plan.reason = "sharded by the user's dataset function";
  return std::make_unique<DistributedDataset>(
      std::move(*it), DistributedDataset::Mode::kOneBatchPerReplica, config_.devices, 0,
      std::move(plan), options.prefetch < 0 ? num_local_replicas() : options.prefetch,
      options.start_step, StagingContexts(options));
}

}  // namespace lockstep::distribute

// StrategyExtended (strategy.h): the cross-replica operations of every strategy (reductions
// to the replicas or the host, updates per variable copy, broadcasts from the chief) and the
// one place that decides where a replica reads a variable (ReadForReplica). Every
// host<->device copy these make is explicit and named in strategy.h; nothing else here
// copies. Thread model: as Strategy (ReadForReplica on the replica threads, each with its own
// replica; everything else in cross-replica context).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/blob_broadcast.h"
#include "common/status.h"
#include "distribute/strategy.h"
#include "distribute/tensor_math.h"
#include "engine/gpu/device_tensor.h"

namespace lockstep::distribute {

using engine::Tensor;

const std::vector<engine::Device>& StrategyExtended::worker_devices() const {
  return strategy_->config_.devices;
}

absl::StatusOr<const engine::gpu::GpuDevice*> StrategyExtended::replica_gpu(
    int local_replica) const {
  const StrategyConfig& cfg = strategy_->config_;
  if (local_replica < 0 || local_replica >= static_cast<int>(cfg.devices.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("local replica ", local_replica, " of ", cfg.devices.size()));
  }
  return GpuDeviceSet::ForReplica(cfg.gpus.get(), cfg.devices[local_replica]);
}

absl::StatusOr<const engine::gpu::GpuDevice*> StrategyExtended::copy_gpu(int copy) const {
  if (strategy_->config_.variable_kind == DistributedVariable::Kind::kCentral) {
    return static_cast<const engine::gpu::GpuDevice*>(nullptr);
  }
  return replica_gpu(copy);
}

CrossDeviceOps& StrategyExtended::cross_device_ops() {
  return *strategy_->config_.cross_device_ops;
}

Destination StrategyExtended::variable_destination() const {
  return strategy_->config_.variable_kind == DistributedVariable::Kind::kCentral
             ? Destination::kHost
             : Destination::kReplicas;
}

absl::StatusOr<std::vector<Tensor>> StrategyExtended::ReadForReplica(
    const std::vector<DistributedVariable>& variables, int local_replica) const {
  LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, replica_gpu(local_replica));
  std::vector<Tensor> out;
  out.reserve(variables.size());
  bool copied = false;
  for (const DistributedVariable& v : variables) {
    const Tensor& value = v.Read(local_replica);
    Tensor* buffer = v.replica_buffer(local_replica);
    if (gpu == nullptr || !value.on_host() || buffer == nullptr) {
      out.push_back(value);
      continue;
    }
    const std::string where = absl::StrCat("reading central variable '", v.name(), "' on ",
                                           worker_devices()[local_replica].name());
    if (!buffer->valid()) {
      absl::StatusOr<Tensor> allocated =
          engine::gpu::AllocateTensor(*gpu->context, value.dtype(), value.shape());
      if (!allocated.ok()) return Annotate(allocated.status(), where);
      *buffer = *std::move(allocated);
    }
    // Enqueued; the synchronisation below completes it before the host value can change.
    absl::Status s = engine::gpu::CopyInto(*gpu->context, value, buffer);
    if (!s.ok()) return Annotate(s, where);
    copied = true;
    out.push_back(*buffer);
  }
  if (copied) {
    absl::Status s = gpu->context->Synchronize();
    if (!s.ok()) {
      return Annotate(
          s, absl::StrCat("copying central variables to ", worker_devices()[local_replica].name()));
    }
  }
  return out;
}

absl::StatusOr<DistributedValues> StrategyExtended::ReduceTo(ReduceOp op,
                                                             const DistributedValues& value,
                                                             Destination destination) {
  LS_ASSIGN_OR_RETURN(std::vector<DistributedValues> out, BatchReduceTo(op, {value}, destination));
  return std::move(out[0]);
}

absl::StatusOr<std::vector<DistributedValues>> StrategyExtended::BatchReduceTo(
    ReduceOp op, const std::vector<DistributedValues>& values, Destination destination) {
  Strategy& s = *strategy_;
  std::vector<Tensor> sums;
  sums.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    LS_ASSIGN_OR_RETURN(DistributedValues local, s.CheckLocal(values[i], "BatchReduceTo"));
    const Tensor& first = local.component(0);
    // A GPU replica's value is staged through host memory (explicitly: this path sums on the
    // host; NcclAllReduce's replica-context path reduces device buffers in place).
    LS_ASSIGN_OR_RETURN(Tensor first_host, s.OnHost(first, 0));
    Tensor sum = HostCopy(first_host, engine::Device::Cpu(0));
    for (int r = 1; r < local.num_components(); ++r) {
      const Tensor& t = local.component(r);
      if (t.shape() != first.shape() || t.dtype() != first.dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value ", i, ": replica ", r, " has ", t.DebugString(), " but replica 0 has ",
            first.DebugString(), "; only values of one shape can be reduced across replicas"));
      }
      LS_ASSIGN_OR_RETURN(Tensor t_host, s.OnHost(t, r));
      LS_RETURN_IF_ERROR(AddInto(t_host, &sum));
    }
    sums.push_back(std::move(sum));
  }
  std::vector<Tensor*> ptrs;
  for (Tensor& t : sums) ptrs.push_back(&t);
  LS_RETURN_IF_ERROR(s.config_.cross_device_ops->CrossWorkerSum(ptrs, s.Deadline()));
  std::vector<DistributedValues> out;
  for (Tensor& sum : sums) {
    if (op == ReduceOp::kMean) LS_RETURN_IF_ERROR(DivideBy(s.num_replicas_in_sync(), &sum));
    if (destination == Destination::kHost) {
      out.push_back(DistributedValues::Mirrored({sum}));
      continue;
    }
    std::vector<Tensor> copies;
    for (int r = 0; r < s.num_local_replicas(); ++r) {
      LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, replica_gpu(r));
      LS_ASSIGN_OR_RETURN(Tensor copy, CopyToDevice(sum, s.config_.devices[r], gpu));
      copies.push_back(std::move(copy));
    }
    out.push_back(DistributedValues::Mirrored(std::move(copies)));
  }
  return out;
}

absl::Status StrategyExtended::BroadcastFromChief(const std::vector<Tensor*>& tensors) {
  for (Tensor* t : tensors) LS_RETURN_IF_ERROR(strategy_->BroadcastFromChief(t));
  return absl::OkStatus();
}

absl::Status StrategyExtended::BroadcastFromChief(
    const std::vector<DistributedVariable*>& variables) {
  for (DistributedVariable* v : variables) {
    Tensor& first = v->copy(0);
    if (!first.on_host()) {
      // Device copies: the chief's copy 0 travels through host memory, then into every copy.
      absl::Status s = BroadcastDeviceVariable(v);
      if (!s.ok()) {
        return Annotate(s, absl::StrCat("broadcasting variable '", v->name(), "' from the chief"));
      }
      continue;
    }
    absl::Status s = strategy_->BroadcastFromChief(&first);
    if (!s.ok()) {
      return Annotate(s, absl::StrCat("broadcasting variable '", v->name(), "' from the chief"));
    }
    for (int c = 1; c < v->num_copies(); ++c) {
      if (first.num_bytes() > 0) {
        std::memcpy(v->copy(c).raw_data(), first.raw_data(), first.num_bytes());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status StrategyExtended::BroadcastDeviceVariable(DistributedVariable* v) {
  LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu0, copy_gpu(0));
  LS_ASSIGN_OR_RETURN(Tensor host, ToHost(v->copy(0), gpu0));
  if (strategy_->config_.cross_worker == nullptr && v->num_copies() == 1) return absl::OkStatus();
  host = HostCopy(host, engine::Device::Cpu(0));
  LS_RETURN_IF_ERROR(strategy_->BroadcastFromChief(&host));
  for (int c = 0; c < v->num_copies(); ++c) {
    LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, copy_gpu(c));
    LS_RETURN_IF_ERROR(CopyInto(host, &v->copy(c), gpu));
  }
  return absl::OkStatus();
}

absl::Status StrategyExtended::BroadcastBytes(std::string* bytes, int root,
                                              const collectives::BlobOptions& options) {
  const StrategyConfig& cfg = strategy_->config_;
  if (root < 0 || root >= cfg.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BroadcastBytes: root ", root, " is not a worker rank (", cfg.num_workers, " workers)"));
  }
  if (cfg.cross_worker == nullptr) return absl::OkStatus();
  return collectives::BroadcastBlob(*cfg.cross_worker, bytes, root, options, strategy_->Deadline());
}

absl::Status StrategyExtended::Update(const std::vector<DistributedVariable*>& variables,
                                      const std::vector<DistributedValues>& reduced_gradients,
                                      const UpdateFn& fn) {
  if (variables.size() != reduced_gradients.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Update: ", variables.size(), " variables but ",
                                                   reduced_gradients.size(), " gradients"));
  }
  if (variables.empty()) return absl::OkStatus();
  const int copies = variables[0]->num_copies();
  for (size_t i = 0; i < variables.size(); ++i) {
    if (variables[i]->num_copies() != copies) {
      return absl::InvalidArgumentError(
          absl::StrCat("Update: variable '", variables[i]->name(), "' has ",
                       variables[i]->num_copies(), " copies but '", variables[0]->name(), "' has ",
                       copies, "; were they created in the same strategy's scope?"));
    }
    const int comps = reduced_gradients[i].num_components();
    if (comps != 1 && comps != copies) {
      return absl::InvalidArgumentError(
          absl::StrCat("Update: the gradient of '", variables[i]->name(), "' has ", comps,
                       " components for ", copies, " copies; reduce it with BatchReduceTo first"));
    }
  }
  for (int c = 0; c < copies; ++c) {
    std::vector<Tensor> vars;
    std::vector<Tensor> grads;
    for (size_t i = 0; i < variables.size(); ++i) {
      vars.push_back(variables[i]->copy(c));
      const DistributedValues& g = reduced_gradients[i];
      grads.push_back(g.component(g.num_components() == 1 ? 0 : c));
    }
    LS_RETURN_IF_ERROR(fn(c, vars, grads));
    for (size_t i = 0; i < variables.size(); ++i) variables[i]->copy(c) = vars[i];
  }
  return absl::OkStatus();
}

}  // namespace lockstep::distribute

#include "distribute/replica_context.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "distribute/tensor_math.h"
#include "engine/gpu/device_tensor.h"

namespace lockstep::distribute {
namespace {

// A pending all-reduce that already failed.
class FailedPending final : public PendingAllReduce {
 public:
  explicit FailedPending(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }

 private:
  absl::Status status_;
};

// NCCL's in-place SUM of a device tensor, then MEAN's scaling on the device.
class DevicePending final : public PendingAllReduce {
 public:
  DevicePending(std::unique_ptr<PendingAllReduce> sum, engine::Tensor* mean_of,
                const engine::gpu::GpuDevice* gpu, int num_in_sync)
      : sum_(std::move(sum)), mean_of_(mean_of), gpu_(gpu), num_in_sync_(num_in_sync) {}
  absl::Status Wait() override {
    LS_RETURN_IF_ERROR(sum_->Wait());
    if (mean_of_ == nullptr) return absl::OkStatus();
    float* x = mean_of_->device_data<float>();
    return gpu_->kernels->Scale(x, 1.f / static_cast<float>(num_in_sync_), x,
                                mean_of_->num_elements(), gpu_->stream());
  }

 private:
  std::unique_ptr<PendingAllReduce> sum_;
  engine::Tensor* mean_of_;  // null for SUM
  const engine::gpu::GpuDevice* gpu_;
  int num_in_sync_;
};

// A device tensor staged through the host: its host copy all-reduced, then copied back.
class StagedPending final : public PendingAllReduce {
 public:
  StagedPending(std::unique_ptr<engine::Tensor> host, engine::Tensor* device,
                const engine::gpu::GpuDevice* gpu)
      : host_(std::move(host)), device_(device), gpu_(gpu) {}
  void Start(std::unique_ptr<PendingAllReduce> pending) { pending_ = std::move(pending); }
  engine::Tensor* host() { return host_.get(); }
  absl::Status Wait() override {
    LS_RETURN_IF_ERROR(pending_->Wait());
    return CopyInto(*host_, device_, gpu_);
  }

 private:
  std::unique_ptr<engine::Tensor> host_;  // what the host-side ops all-reduce
  std::unique_ptr<PendingAllReduce> pending_;
  engine::Tensor* device_;
  const engine::gpu::GpuDevice* gpu_;
};

// A small number every replica derives alike from a dtype and shape (FNV-1a; not absl::Hash,
// which differs between processes), in [1, 2^20] so that its square's sums stay exact.
int64_t Signature(const engine::Tensor& t) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<int64_t>(t.dtype()));
  mix(t.shape().rank());
  for (int64_t d : t.shape().dims()) mix(d);
  return static_cast<int64_t>(h % (uint64_t{1} << 20)) + 1;
}

}  // namespace

absl::Status ReplicaContext::CheckDeviceValue(const char* what, const engine::Tensor& value) const {
  if (value.device() != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReplicaContext::", what, ": argument `value` (", value.DebugString(), ") lies on ",
        value.device().name(), ", not on replica ", replica_id_, "'s device ", device_.name()));
  }
  if (gpu_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ReplicaContext::", what, ": replica ", replica_id_, " has no engine device for ",
        device_.name(), " (LocalDevices::gpus), so argument `value` cannot be read"));
  }
  return absl::OkStatus();
}

absl::Status ReplicaContext::CheckReplicasAgree(const char* what, const engine::Tensor& value) {
  // Every replica all-reduces (s, s * s) of its signature s: they all passed the same dtype and
  // shape exactly when n * sum(s^2) == sum(s)^2 (Cauchy-Schwarz), which every replica sees alike.
  const int64_t s = Signature(value);
  engine::Tensor sig = engine::Tensor::FromVector<int64_t>({s, s * s}, engine::Shape{2});
  const absl::Time deadline = absl::Now() + timeout_;
  if (ops_->kind() == CrossDeviceOpsKind::kNcclAllReduce) {
    // NCCL reads device memory only.
    LS_ASSIGN_OR_RETURN(engine::Tensor on_device, CopyToDevice(sig, device_, gpu_));
    LS_RETURN_IF_ERROR(
        ops_->AllReduceAsync(local_id_, ReduceOp::kSum, &on_device, deadline)->Wait());
    LS_ASSIGN_OR_RETURN(sig, ToHost(on_device, gpu_));
  } else {
    sig = HostCopy(sig, device_);
    LS_RETURN_IF_ERROR(ops_->AllReduceAsync(local_id_, ReduceOp::kSum, &sig, deadline)->Wait());
  }
  const int64_t sum = sig.data<int64_t>()[0];
  const int64_t sum_sq = sig.data<int64_t>()[1];
  if (sum_sq * num_in_sync_ != sum * sum) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReplicaContext::", what, ": the replicas disagree on argument `value`'s dtype or shape (",
        "replica ", replica_id_, " passed ", value.DebugString(),
        "); every replica must all-reduce the same dtype and shape in the same order"));
  }
  return absl::OkStatus();
}

std::unique_ptr<PendingAllReduce> ReplicaContext::DeviceAllReduceAsync(const char* what,
                                                                       ReduceOp op,
                                                                       engine::Tensor* value,
                                                                       bool check_agreement) {
  if (absl::Status s = CheckDeviceValue(what, *value); !s.ok()) {
    return std::make_unique<FailedPending>(s);
  }
  if (check_agreement) {
    if (absl::Status s = CheckReplicasAgree(what, *value); !s.ok()) {
      return std::make_unique<FailedPending>(s);
    }
  }
  const absl::Time deadline = absl::Now() + timeout_;
  if (ops_->kind() == CrossDeviceOpsKind::kNcclAllReduce) {
    if (op == ReduceOp::kMean && value->dtype() != DType::kF32) {
      return std::make_unique<FailedPending>(absl::InvalidArgumentError(absl::StrCat(
          "ReplicaContext::", what, ": MEAN of argument `value` (", value->DebugString(),
          ") on a GPU takes f32; all-reduce SUM and divide, or stage it through the host")));
    }
    return std::make_unique<DevicePending>(
        ops_->AllReduceAsync(local_id_, ReduceOp::kSum, value, deadline),
        op == ReduceOp::kMean ? value : nullptr, gpu_, num_in_sync_);
  }
  // The host-side ops read host memory: a host copy goes, and comes back at Wait().
  absl::StatusOr<engine::Tensor> host = ToHost(*value, gpu_);
  if (!host.ok()) return std::make_unique<FailedPending>(host.status());
  auto staged = std::make_unique<StagedPending>(std::make_unique<engine::Tensor>(*std::move(host)),
                                                value, gpu_);
  staged->Start(ops_->AllReduceAsync(local_id_, op, staged->host(), deadline));
  return staged;
}

absl::StatusOr<engine::Tensor> ReplicaContext::AllReduce(ReduceOp op, const engine::Tensor& value) {
  if (value.on_host()) {
    engine::Tensor out = HostCopy(value, device_);
    absl::Status s = AllReduceAsync(op, &out)->Wait();
    if (!s.ok()) return s;
    return out;
  }
  LS_RETURN_IF_ERROR(CheckDeviceValue("AllReduce", value));
  // The result is a copy made on the device; `value` stays as it was.
  LS_ASSIGN_OR_RETURN(engine::Tensor out,
                      engine::gpu::AllocateTensor(*gpu_->context, value.dtype(), value.shape()));
  LS_RETURN_IF_ERROR(gpu_->context->CopyOnDevice(out.raw_device_data(), value.raw_device_data(),
                                                 value.num_bytes()));
  LS_RETURN_IF_ERROR(DeviceAllReduceAsync("AllReduce", op, &out, /*check_agreement=*/true)->Wait());
  return out;
}

std::unique_ptr<PendingAllReduce> ReplicaContext::AllReduceAsync(ReduceOp op,
                                                                 engine::Tensor* value) {
  if (value != nullptr && value->valid() && !value->on_host()) {
    return DeviceAllReduceAsync("AllReduceAsync", op, value, /*check_agreement=*/false);
  }
  return ops_->AllReduceAsync(local_id_, op, value, absl::Now() + timeout_);
}

std::unique_ptr<GradientReducer> ReplicaContext::MakeGradientReducer(ReduceOp op) {
  return ops_->MakeGradientReducer(local_id_, op, absl::Now() + timeout_);
}

absl::Status ReplicaContext::BatchAllReduce(ReduceOp op,
                                            const std::vector<engine::Tensor*>& values) {
  std::vector<std::unique_ptr<PendingAllReduce>> pending;
  pending.reserve(values.size());
  for (engine::Tensor* v : values) {
    pending.push_back(v != nullptr && v->valid() && !v->on_host()
                          ? DeviceAllReduceAsync("BatchAllReduce", op, v, /*check_agreement=*/true)
                          : AllReduceAsync(op, v));
  }
  absl::Status first;
  for (auto& p : pending) first.Update(p->Wait());
  return first;
}

}  // namespace lockstep::distribute

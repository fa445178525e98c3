#include "distribute/gpu_devices.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::distribute {

absl::StatusOr<std::shared_ptr<GpuDeviceSet>> GpuDeviceSet::Create(std::shared_ptr<CudaApi> api,
                                                                   const std::vector<int>& ordinals,
                                                                   const Backend& backend) {
  if (api == nullptr || !backend.kernels || !backend.blas) {
    return absl::InvalidArgumentError(
        "GpuDeviceSet: a CUDA API and a backend that makes kernels and BLAS are required");
  }
  std::shared_ptr<GpuDeviceSet> set(new GpuDeviceSet(std::move(api), backend.name));
  for (int ordinal : ordinals) {
    const int index = static_cast<int>(set->entries_.size());
    for (const auto& e : set->entries_) {
      if (e->context->device() == ordinal) {
        return absl::InvalidArgumentError(
            absl::StrCat("GpuDeviceSet: CUDA device ", ordinal, " given twice"));
      }
    }
    auto e = std::make_unique<Entry>();
    const std::string where =
        absl::StrCat("building /gpu:", index, " (CUDA device ", ordinal, ", ", backend.name, ")");
    absl::StatusOr<std::unique_ptr<engine::gpu::DeviceContext>> context =
        engine::gpu::DeviceContext::Create(set->api_.get(), ordinal, index);
    if (!context.ok()) return Annotate(context.status(), where);
    e->context = *std::move(context);
    absl::StatusOr<std::unique_ptr<engine::gpu::GpuKernels>> kernels = backend.kernels(*e->context);
    if (!kernels.ok()) return Annotate(kernels.status(), where);
    e->kernels = *std::move(kernels);
    absl::StatusOr<std::unique_ptr<engine::gpu::BlasApi>> blas = backend.blas(*e->context);
    if (!blas.ok()) return Annotate(blas.status(), where);
    e->blas = *std::move(blas);
    e->handles.context = e->context.get();
    e->handles.kernels = e->kernels.get();
    e->handles.blas = e->blas.get();
    set->entries_.push_back(std::move(e));
  }
  return set;
}

GpuDeviceSet::~GpuDeviceSet() {
  // BLAS and kernels before the context they use; every context before the API.
  for (auto& e : entries_) {
    e->handles.profiler = nullptr;
    e->profiler.reset();
    e->blas.reset();
    e->kernels.reset();
    e->context.reset();
  }
  entries_.clear();
}

const engine::gpu::GpuDevice* GpuDeviceSet::Find(int index) const {
  if (index < 0 || index >= static_cast<int>(entries_.size())) return nullptr;
  return &entries_[index]->handles;
}

absl::StatusOr<const engine::gpu::GpuDevice*> GpuDeviceSet::ForReplica(
    const GpuDeviceSet* set, const engine::Device& device) {
  if (device.type() != engine::Device::Type::kCuda) return nullptr;
  const engine::gpu::GpuDevice* gpu = set == nullptr ? nullptr : set->Find(device.index());
  if (gpu == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replica device ", device.name(), " has no GPU device built for it (",
        set == nullptr ? std::string("this worker gave its strategy no GPU devices")
                       : absl::StrCat("this worker built ", set->ordinals().size(), " GPU(s)"),
        "; LocalDevices::gpus)"));
  }
  return gpu;
}

absl::StatusOr<engine::gpu::OpProfiler*> GpuDeviceSet::StartProfiling(int index) {
  if (index < 0 || index >= static_cast<int>(entries_.size())) {
    return absl::NotFoundError(
        absl::StrCat("GpuDeviceSet::StartProfiling: no /gpu:", index, " in this set"));
  }
  Entry& e = *entries_[index];
  if (e.profiler == nullptr) {
    LS_ASSIGN_OR_RETURN(e.profiler,
                        engine::gpu::OpProfiler::Create(api_.get(), e.context->stream()));
    e.handles.profiler = e.profiler.get();
  }
  return e.profiler.get();
}

std::vector<int> GpuDeviceSet::ordinals() const {
  std::vector<int> out;
  for (const auto& e : entries_) out.push_back(e->context->device());
  return out;
}

}  // namespace lockstep::distribute

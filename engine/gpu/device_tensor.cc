#include "engine/gpu/device_tensor.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::engine::gpu {
namespace {

Device Of(const DeviceContext& c) { return Device(Device::Type::kCuda, c.index()); }

absl::Status WantHost(const DeviceContext& c, const Tensor& t, absl::string_view call) {
  if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat(call, ": an empty tensor"));
  if (!t.on_host()) {
    return absl::InvalidArgumentError(absl::StrCat(call, " to ", Of(c).name(), ": the tensor ",
                                                   t.DebugString(), " is on ", t.device().name(),
                                                   ", not on the host"));
  }
  return absl::OkStatus();
}

absl::Status WantDevice(const DeviceContext& c, const Tensor& t, absl::string_view call) {
  if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat(call, ": an empty tensor"));
  if (t.device() != Of(c)) {
    return absl::InvalidArgumentError(absl::StrCat(call, " on ", Of(c).name(), ": the tensor ",
                                                   t.DebugString(), " is on ", t.device().name()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> AllocateTensor(DeviceContext& context, DType dtype, const Shape& shape) {
  const size_t bytes = shape.num_elements() * DTypeSize(dtype);
  // A zero-element tensor still needs a non-null buffer (valid()): the allocator gives null
  // for 0 bytes, so take its smallest block.
  LS_ASSIGN_OR_RETURN(void* p, context.Allocate(bytes == 0 ? 1 : bytes));
  DeviceContext* c = &context;
  std::shared_ptr<char> buffer(static_cast<char*>(p), [c](char* q) { (void)c->Free(q); });
  return Tensor(dtype, shape, std::move(buffer), Of(context));
}

absl::StatusOr<Tensor> ZerosOnDevice(DeviceContext& context, DType dtype, const Shape& shape) {
  LS_ASSIGN_OR_RETURN(Tensor t, AllocateTensor(context, dtype, shape));
  LS_RETURN_IF_ERROR(context.Zero(t.raw_device_data(), t.num_bytes()));
  return t;
}

absl::StatusOr<Tensor> CopyToDevice(DeviceContext& context, const Tensor& host) {
  LS_RETURN_IF_ERROR(WantHost(context, host, "CopyToDevice"));
  LS_ASSIGN_OR_RETURN(Tensor t, AllocateTensor(context, host.dtype(), host.shape()));
  LS_RETURN_IF_ERROR(context.CopyToDevice(t.raw_device_data(), host.raw_data(), host.num_bytes()));
  return t;
}

absl::StatusOr<Tensor> CopyToHost(DeviceContext& context, const Tensor& device) {
  LS_RETURN_IF_ERROR(WantDevice(context, device, "CopyToHost"));
  Tensor t(device.dtype(), device.shape());
  LS_RETURN_IF_ERROR(context.CopyToHost(t.raw_data(), device.raw_device_data(), t.num_bytes()));
  LS_RETURN_IF_ERROR(context.Synchronize());
  return t;
}

absl::Status CopyInto(DeviceContext& context, const Tensor& host, Tensor* device) {
  LS_RETURN_IF_ERROR(WantHost(context, host, "CopyInto"));
  LS_RETURN_IF_ERROR(WantDevice(context, *device, "CopyInto"));
  if (host.dtype() != device->dtype() || host.shape() != device->shape()) {
    return absl::InvalidArgumentError(absl::StrCat("CopyInto on ", Of(context).name(), ": ",
                                                   host.DebugString(), " into ",
                                                   device->DebugString()));
  }
  return context.CopyToDevice(device->raw_device_data(), host.raw_data(), host.num_bytes());
}

}  // namespace lockstep::engine::gpu

#include "engine/gpu/device_context.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::engine::gpu {

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::Create(CudaApi* api, int device) {
  return Create(api, device, device);
}

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::Create(CudaApi* api, int device,
                                                                     int index) {
  if (index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceContext: /gpu:", index, " (CUDA device ", device, ") is not a name"));
  }
  LS_ASSIGN_OR_RETURN(int count, api->DeviceCount());
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceContext: no GPU ", device, " (", count,
                                                   " visible; check CUDA_VISIBLE_DEVICES)"));
  }
  LS_ASSIGN_OR_RETURN(DeviceProperties properties, api->GetDeviceProperties(device));
  LS_RETURN_IF_ERROR(api->SetDevice(device));
  LS_ASSIGN_OR_RETURN(CudaStream stream, api->StreamCreate());
  return std::unique_ptr<DeviceContext>(
      new DeviceContext(api, device, index, std::move(properties), stream));
}

DeviceContext::DeviceContext(CudaApi* api, int device, int index, DeviceProperties properties,
                             CudaStream stream)
    : api_(api),
      device_(device),
      index_(index),
      properties_(std::move(properties)),
      stream_(stream),
      allocator_(std::make_unique<CachingAllocator>(api, device, stream)) {}

DeviceContext::~DeviceContext() {
  // Errors here have nowhere to go: a context in error is torn down with the process.
  Current().IgnoreError();
  allocator_.reset();
  api_->StreamDestroy(stream_).IgnoreError();
}

absl::Status DeviceContext::Current() const { return api_->SetDevice(device_); }

absl::Status DeviceContext::Named(absl::Status s) const {
  if (s.ok()) return s;
  const std::string who = index_ == device_
                              ? absl::StrCat("GPU ", device_)
                              : absl::StrCat("GPU ", index_, " (CUDA device ", device_, ")");
  return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
}

absl::StatusOr<void*> DeviceContext::Allocate(size_t bytes) {
  LS_RETURN_IF_ERROR(Named(Current()));
  absl::StatusOr<void*> p = allocator_->Allocate(bytes);
  if (!p.ok()) return Named(p.status());
  return p;
}

absl::StatusOr<std::shared_ptr<char>> DeviceContext::AllocateOutside(size_t bytes) {
  LS_RETURN_IF_ERROR(Named(Current()));
  absl::StatusOr<std::shared_ptr<char>> p = allocator_->AllocateOutside(bytes);
  if (!p.ok()) return Named(p.status());
  return p;
}

absl::Status DeviceContext::Free(void* device_ptr) { return Named(allocator_->Free(device_ptr)); }

absl::Status DeviceContext::CopyToDevice(void* device_dst, const void* host_src, size_t bytes) {
  LS_RETURN_IF_ERROR(Named(Current()));
  return Named(api_->MemcpyAsync(device_dst, host_src, bytes, CopyKind::kHostToDevice, stream_));
}

absl::Status DeviceContext::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  LS_RETURN_IF_ERROR(Named(Current()));
  return Named(api_->MemcpyAsync(host_dst, device_src, bytes, CopyKind::kDeviceToHost, stream_));
}

absl::Status DeviceContext::CopyOnDevice(void* device_dst, const void* device_src, size_t bytes) {
  LS_RETURN_IF_ERROR(Named(Current()));
  return Named(
      api_->MemcpyAsync(device_dst, device_src, bytes, CopyKind::kDeviceToDevice, stream_));
}

absl::Status DeviceContext::Zero(void* device_ptr, size_t bytes) {
  LS_RETURN_IF_ERROR(Named(Current()));
  return Named(api_->MemsetAsync(device_ptr, 0, bytes, stream_));
}

absl::Status DeviceContext::Synchronize() {
  LS_RETURN_IF_ERROR(Named(Current()));
  return Named(api_->StreamSynchronize(stream_));
}

}  // namespace lockstep::engine::gpu

#include "distribute/device_bf16_codec.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::distribute {

absl::StatusOr<void*> DeviceBf16Codec::Narrow(float* data, size_t count) {
  LS_ASSIGN_OR_RETURN(void* wire, gpu_->context->Allocate(count * sizeof(uint16_t)));
  absl::Status s = gpu_->kernels->CastToBFloat16(data, static_cast<uint16_t*>(wire),
                                                 static_cast<int64_t>(count), gpu_->stream());
  if (!s.ok()) {
    gpu_->context->Free(wire).IgnoreError();
    return Annotate(
        s, absl::StrCat("BF16 compression of a gradient on /gpu:", gpu_->context->device()));
  }
  return wire;
}

absl::Status DeviceBf16Codec::Widen(void* wire, float* data, size_t count) {
  absl::Status s = gpu_->kernels->CastFromBFloat16(static_cast<const uint16_t*>(wire), data,
                                                   static_cast<int64_t>(count), gpu_->stream());
  // Back to the cache at once: later users of the block are ordered after the widening.
  s.Update(gpu_->context->Free(wire));
  if (!s.ok()) {
    return Annotate(
        s, absl::StrCat("BF16 compression: widening a gradient on /gpu:", gpu_->context->device()));
  }
  return s;
}

void DeviceBf16Codec::Discard(void* wire) { gpu_->context->Free(wire).IgnoreError(); }

}  // namespace lockstep::distribute

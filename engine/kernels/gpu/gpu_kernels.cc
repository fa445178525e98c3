#include "engine/kernels/gpu/gpu_kernels.h"

#include "absl/strings/str_cat.h"

namespace lockstep::engine::gpu {

absl::Status CheckLaunch(const char* kernel, int64_t n,
                         std::initializer_list<const void*> buffers) {
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": negative element count ", n));
  }
  if (n == 0) return absl::OkStatus();
  int i = 0;
  for (const void* b : buffers) {
    if (b == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel, ": buffer ", i, " is null with ", n, " elements"));
    }
    ++i;
  }
  return absl::OkStatus();
}

absl::Status CheckRows(const char* kernel, int64_t rows, int64_t cols,
                       std::initializer_list<const void*> buffers) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": negative shape [", rows, ", ", cols, "]"));
  }
  return CheckLaunch(kernel, rows * cols, buffers);
}

}  // namespace lockstep::engine::gpu

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

absl::Status CheckWindow(const char* kernel, const WindowGeometry& w) {
  const bool sizes = w.n >= 0 && w.h >= 0 && w.w >= 0 && w.c >= 0 && w.oh >= 0 && w.ow >= 0;
  if (!sizes || w.kh < 1 || w.kw < 1 || w.sh < 1 || w.sw < 1 || w.pad_top < 0 || w.pad_left < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": window geometry is not a shape: input [", w.n, ", ", w.h, ", ", w.w,
                     ", ", w.c, "], window ", w.kh, "x", w.kw, ", strides ", w.sh, "x", w.sw,
                     ", output ", w.oh, "x", w.ow, ", padding ", w.pad_top, ", ", w.pad_left));
  }
  return absl::OkStatus();
}

absl::Status CheckBatchNorm(const char* kernel, const BatchNormDims& d) {
  // The groups cover the rows: every group but the last is full, the last is not empty.
  const bool covered = d.rows == 0 ? d.groups == 1
                                   : d.group_rows > 0 && (d.groups - 1) * d.group_rows < d.rows &&
                                         d.groups * d.group_rows >= d.rows;
  if (d.rows < 0 || d.c < 0 || d.groups < 1 || d.group_rows < 0 || !covered) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": ", d.rows, " rows of ", d.c,
                                                   " channels are not ", d.groups, " groups of ",
                                                   d.group_rows, " rows"));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine::gpu

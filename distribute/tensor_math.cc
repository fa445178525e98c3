#include "distribute/tensor_math.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/gpu/device_tensor.h"

namespace lockstep::distribute {

using engine::Shape;
using engine::Tensor;

namespace {

absl::Status CheckSupported(const Tensor& t, const char* what) {
  if (!t.valid()) return absl::InvalidArgumentError(absl::StrCat(what, ": null tensor"));
  if (!t.on_host()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", t.DebugString(), " is in ", t.device().name(),
                     "'s memory; host arithmetic needs a host tensor (copy it with ToHost first)"));
  }
  switch (t.dtype()) {
    case DType::kF32:
    case DType::kF64:
    case DType::kI32:
    case DType::kI64:
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(what, ": dtype ", DTypeName(t.dtype()),
                                                     " is not supported (f32, f64, i32, i64)"));
  }
}

template <typename T>
void AddTyped(const Tensor& x, Tensor* acc) {
  const T* src = x.data<T>();
  T* dst = acc->data<T>();
  for (int64_t i = 0, n = x.num_elements(); i < n; ++i) dst[i] += src[i];
}

template <typename T>
void DivideTyped(double divisor, Tensor* t) {
  T* d = t->data<T>();
  for (int64_t i = 0, n = t->num_elements(); i < n; ++i) d[i] = static_cast<T>(d[i] / divisor);
}

template <typename T>
void SumRowsTyped(const Tensor& x, int64_t rows, int64_t row_size, Tensor* out) {
  const T* src = x.data<T>();
  T* dst = out->data<T>();
  for (int64_t j = 0; j < row_size; ++j) dst[j] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < row_size; ++j) dst[j] += src[r * row_size + j];
  }
}

}  // namespace

absl::Status AddInto(const Tensor& x, Tensor* acc) {
  if (auto s = CheckSupported(x, "AddInto"); !s.ok()) return s;
  if (acc == nullptr || !acc->valid() || acc->dtype() != x.dtype() || acc->shape() != x.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot add ", x.DebugString(), " into ",
                     acc == nullptr ? std::string("null") : acc->DebugString(),
                     ": dtypes and shapes must match"));
  }
  switch (x.dtype()) {
    case DType::kF32:
      AddTyped<float>(x, acc);
      break;
    case DType::kF64:
      AddTyped<double>(x, acc);
      break;
    case DType::kI32:
      AddTyped<int32_t>(x, acc);
      break;
    default:
      AddTyped<int64_t>(x, acc);
      break;
  }
  return absl::OkStatus();
}

absl::Status DivideBy(double divisor, Tensor* t) {
  if (auto s = CheckSupported(*t, "DivideBy"); !s.ok()) return s;
  if (divisor == 0) return absl::InvalidArgumentError("DivideBy: division by zero");
  switch (t->dtype()) {
    case DType::kF32:
      DivideTyped<float>(divisor, t);
      break;
    case DType::kF64:
      DivideTyped<double>(divisor, t);
      break;
    case DType::kI32:
      DivideTyped<int32_t>(divisor, t);
      break;
    default:
      DivideTyped<int64_t>(divisor, t);
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> SumAxis0(const Tensor& x) {
  if (auto s = CheckSupported(x, "SumAxis0"); !s.ok()) return s;
  if (x.shape().rank() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reduce over axis 0 of a scalar (", x.DebugString(),
                     "); use axis none for values without a batch dimension"));
  }
  std::vector<int64_t> dims(x.shape().dims().begin() + 1, x.shape().dims().end());
  Tensor out(x.dtype(), Shape(dims), x.device());
  const int64_t rows = x.shape().dim(0);
  const int64_t row_size = out.num_elements();
  switch (x.dtype()) {
    case DType::kF32:
      SumRowsTyped<float>(x, rows, row_size, &out);
      break;
    case DType::kF64:
      SumRowsTyped<double>(x, rows, row_size, &out);
      break;
    case DType::kI32:
      SumRowsTyped<int32_t>(x, rows, row_size, &out);
      break;
    default:
      SumRowsTyped<int64_t>(x, rows, row_size, &out);
      break;
  }
  return out;
}

absl::StatusOr<Tensor> SliceAxis0(const Tensor& x, int64_t begin, int64_t end) {
  if (!x.valid()) return absl::InvalidArgumentError("SliceAxis0: null tensor");
  if (x.shape().rank() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split a scalar (", x.DebugString(), ") along a batch dimension"));
  }
  const int64_t n = x.shape().dim(0);
  if (end > n) end = n;
  if (begin > end) begin = end;
  std::vector<int64_t> dims = x.shape().dims();
  dims[0] = end - begin;
  Tensor out(x.dtype(), Shape(dims), x.device());
  const size_t row_bytes = n == 0 ? 0 : x.num_bytes() / n;
  if (out.num_bytes() > 0) {
    std::memcpy(out.raw_data(), static_cast<const char*>(x.raw_data()) + begin * row_bytes,
                out.num_bytes());
  }
  return out;
}

absl::StatusOr<Tensor> ConcatAxis0(const std::vector<Tensor>& parts) {
  if (parts.empty()) return absl::InvalidArgumentError("ConcatAxis0: no parts");
  const Tensor& first = parts[0];
  if (!first.valid() || first.shape().rank() == 0) {
    return absl::InvalidArgumentError("ConcatAxis0: parts need a batch dimension");
  }
  std::vector<int64_t> dims = first.shape().dims();
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    std::vector<int64_t> d = p.valid() ? p.shape().dims() : std::vector<int64_t>{};
    if (!p.valid() || p.dtype() != first.dtype() || d.size() != dims.size() ||
        !std::equal(d.begin() + 1, d.end(), dims.begin() + 1)) {
      return absl::InvalidArgumentError(absl::StrCat("ConcatAxis0: part ", i, " is ",
                                                     p.valid() ? p.DebugString() : "null",
                                                     " but part 0 is ", first.DebugString()));
    }
    rows += d[0];
  }
  dims[0] = rows;
  Tensor out(first.dtype(), Shape(dims), first.device());
  char* dst = static_cast<char*>(out.raw_data());
  for (const Tensor& p : parts) {
    if (p.num_bytes() > 0) std::memcpy(dst, p.raw_data(), p.num_bytes());
    dst += p.num_bytes();
  }
  return out;
}

Tensor HostCopy(const Tensor& x, const engine::Device& device) {
  const engine::Device host =
      device.type() == engine::Device::Type::kCpu ? device : engine::Device::Cpu(0);
  Tensor out(x.dtype(), x.shape(), host);
  if (x.num_bytes() > 0) std::memcpy(out.raw_data(), x.raw_data(), x.num_bytes());
  return out;
}

namespace {
absl::Status CheckGpu(const engine::Device& device, const engine::gpu::GpuDevice* gpu,
                      const char* what) {
  if (gpu == nullptr || gpu->context == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": no GPU device handles for ", device.name()));
  }
  if (gpu->device() != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", device.name(), " given the handles of ", gpu->device().name()));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<Tensor> CopyToDevice(const Tensor& x, const engine::Device& device,
                                    const engine::gpu::GpuDevice* gpu) {
  if (!x.valid()) return absl::InvalidArgumentError("CopyToDevice: null tensor");
  if (!x.on_host()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyToDevice: ", x.DebugString(), " is not a host tensor"));
  }
  if (device.type() == engine::Device::Type::kCpu) return HostCopy(x, device);
  LS_RETURN_IF_ERROR(CheckGpu(device, gpu, "CopyToDevice"));
  LS_ASSIGN_OR_RETURN(Tensor out, engine::gpu::CopyToDevice(*gpu->context, x));
  // `x` may go once this returns.
  LS_RETURN_IF_ERROR(gpu->context->Synchronize());
  return out;
}

void* CollectiveBuffer(Tensor& t) { return t.on_host() ? t.raw_data() : t.raw_device_data(); }

absl::StatusOr<Tensor> ToHost(const Tensor& x, const engine::gpu::GpuDevice* gpu) {
  if (!x.valid() || x.on_host()) return x;
  LS_RETURN_IF_ERROR(CheckGpu(x.device(), gpu, "ToHost"));
  return engine::gpu::CopyToHost(*gpu->context, x);
}

absl::Status CopyInto(const Tensor& host, Tensor* dst, const engine::gpu::GpuDevice* gpu) {
  if (!host.valid() || !host.on_host() || dst == nullptr || !dst->valid() ||
      host.dtype() != dst->dtype() || host.shape() != dst->shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyInto: ", host.valid() ? host.DebugString() : "null", " into ",
                     dst == nullptr || !dst->valid() ? std::string("null") : dst->DebugString(),
                     ": a host tensor of the destination's dtype and shape is needed"));
  }
  if (dst->on_host()) {
    if (host.num_bytes() > 0) std::memcpy(dst->raw_data(), host.raw_data(), host.num_bytes());
    return absl::OkStatus();
  }
  LS_RETURN_IF_ERROR(CheckGpu(dst->device(), gpu, "CopyInto"));
  LS_RETURN_IF_ERROR(engine::gpu::CopyInto(*gpu->context, host, dst));
  return gpu->context->Synchronize();
}

absl::Status AddInto(const Tensor& x, Tensor* acc, const engine::gpu::GpuDevice* gpu) {
  if (acc == nullptr || !acc->valid() || !x.valid()) {
    return absl::InvalidArgumentError("AddInto: a null tensor");
  }
  if (x.on_host() && acc->on_host()) return AddInto(x, acc);
  if (x.device() != acc->device()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot add ", x.DebugString(), " into ",
                                                   acc->DebugString(),
                                                   ": they are on different devices"));
  }
  if (x.dtype() != DType::kF32 || acc->dtype() != DType::kF32 || x.shape() != acc->shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot add ", x.DebugString(), " into ", acc->DebugString(),
                     " on a GPU: two f32 tensors of one shape are needed"));
  }
  LS_RETURN_IF_ERROR(CheckGpu(acc->device(), gpu, "AddInto"));
  if (gpu->kernels == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("AddInto: no GPU kernels for ", acc->device().name()));
  }
  float* y = static_cast<float*>(acc->raw_device_data());
  const float* a = static_cast<const float*>(x.raw_device_data());
  return gpu->kernels->Add(y, a, y, acc->num_elements(), gpu->stream());
}

absl::StatusOr<Tensor> CloneWhereItLies(const Tensor& x, const engine::gpu::GpuDevice* gpu) {
  if (!x.valid() || x.on_host()) return x.valid() ? x.Clone() : x;
  LS_RETURN_IF_ERROR(CheckGpu(x.device(), gpu, "CloneWhereItLies"));
  LS_ASSIGN_OR_RETURN(Tensor out, engine::gpu::AllocateTensor(*gpu->context, x.dtype(), x.shape()));
  if (x.num_bytes() > 0) {
    LS_RETURN_IF_ERROR(
        gpu->context->CopyOnDevice(out.raw_device_data(), x.raw_device_data(), x.num_bytes()));
  }
  return out;
}

}  // namespace lockstep::distribute

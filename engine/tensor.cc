#include "engine/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

constexpr size_t kAlignment = 64;

std::shared_ptr<char> AllocateAligned(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  return std::shared_ptr<char>(static_cast<char*>(std::aligned_alloc(kAlignment, rounded)),
                               [](char* p) { std::free(p); });
}

[[noreturn]] void WrongMemory(const std::string& what) {
  std::fprintf(stderr, "lockstep engine: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace

Tensor::Tensor(DType dtype, Shape shape, Device device)
    : dtype_(dtype), shape_(std::move(shape)), device_(device) {
  if (!on_host()) {
    WrongMemory(absl::StrCat("a host buffer was allocated for the ", device_.name(), " tensor ",
                             DebugString(), "; device tensors come from gpu::AllocateTensor"));
  }
  buffer_ = AllocateAligned(num_bytes());
}

char* Tensor::HostBuffer() const {
  if (!on_host()) {
    WrongMemory(absl::StrCat("host access to the ", device_.name(), " tensor ", DebugString(),
                             ": its memory is on the device; copy it to the host first "
                             "(gpu::CopyToHost)"));
  }
  return buffer_.get();
}

char* Tensor::DeviceBuffer() const {
  if (on_host()) {
    WrongMemory(absl::StrCat("device access to the ", device_.name(), " tensor ", DebugString(),
                             ": its memory is on the host; copy it to the device first "
                             "(gpu::CopyToDevice)"));
  }
  return buffer_.get();
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<char> buffer, Device device)
    : dtype_(dtype), shape_(std::move(shape)), device_(device), buffer_(std::move(buffer)) {}

Tensor Tensor::Zeros(DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  t.SetZero();
  return t;
}

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, Shape shape) {
  Tensor t(DTypeOf<T>(), std::move(shape));
  std::memcpy(t.raw_data(), values.data(), std::min(values.size() * sizeof(T), t.num_bytes()));
  return t;
}
template Tensor Tensor::FromVector<float>(const std::vector<float>&, Shape);
template Tensor Tensor::FromVector<double>(const std::vector<double>&, Shape);
template Tensor Tensor::FromVector<int32_t>(const std::vector<int32_t>&, Shape);
template Tensor Tensor::FromVector<int64_t>(const std::vector<int64_t>&, Shape);

double Tensor::AsDouble(int64_t i) const {
  switch (dtype_) {
    case DType::kF32:
      return data<float>()[i];
    case DType::kF64:
      return data<double>()[i];
    case DType::kI32:
      return data<int32_t>()[i];
    case DType::kI64:
      return static_cast<double>(data<int64_t>()[i]);
    default:
      return 0;
  }
}

absl::StatusOr<Tensor> Tensor::Reshaped(Shape shape) const {
  if (shape.num_elements() != num_elements() || !shape.fully_known()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", DebugString(), " to ",
                                                   shape.ToString(), ": element counts differ"));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  if (!valid()) return Tensor();
  Tensor t(dtype_, shape_, device_);
  std::memcpy(t.raw_data(), raw_data(), num_bytes());
  return t;
}

void Tensor::SetZero() { std::memset(raw_data(), 0, num_bytes()); }

bool Tensor::BitwiseEquals(const Tensor& other) const {
  if (valid() != other.valid()) return false;
  if (!valid()) return true;
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         std::memcmp(raw_data(), other.raw_data(), num_bytes()) == 0;
}

v1::TensorProto Tensor::ToProto() const {
  v1::TensorProto proto;
  proto.set_dtype(DTypeToProto(dtype_));
  *proto.mutable_shape() = shape_.ToProto();
  if (valid()) proto.set_content(static_cast<const char*>(raw_data()), num_bytes());
  return proto;
}

absl::StatusOr<Tensor> Tensor::FromProto(const v1::TensorProto& proto) {
  absl::StatusOr<DType> dtype = DTypeFromProto(proto.dtype());
  if (!dtype.ok()) return dtype.status();
  Shape shape = Shape::FromProto(proto.shape());
  if (!shape.fully_known()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor shape ", shape.ToString(), " has a negative dimension"));
  }
  // The size comes from the shape and is checked against the content before anything is
  // allocated: a corrupt checkpoint's shape must neither overflow the count nor make us
  // allocate more than the bytes it brought.
  uint64_t bytes = DTypeSize(*dtype);
  for (int64_t d : shape.dims()) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", DTypeName(*dtype), shape.ToString(),
                                                     " has more bytes than fit in 64 bits"));
    }
  }
  if (proto.content().size() != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", DTypeName(*dtype), shape.ToString(), " needs ", bytes,
                     " content bytes, the proto has ", proto.content().size()));
  }
  Tensor t(*dtype, shape);
  std::memcpy(t.raw_data(), proto.content().data(), t.num_bytes());
  return t;
}

v1::NamedTensor Tensor::ToNamedProto(absl::string_view name) const {
  v1::NamedTensor named;
  named.set_name(std::string(name));
  *named.mutable_tensor() = ToProto();
  return named;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DTypeName(dtype_), shape_.ToString());
}

}  // namespace lockstep::engine

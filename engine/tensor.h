// Tensor: a dtype, a shape, a device tag and a 64-byte-aligned buffer.
//
// Ownership: the buffer is reference-counted and shared by copies of a Tensor (copying a
// Tensor is cheap and aliases the data, as in TensorFlow); Clone() makes a deep copy.
// Thread model: a Tensor may be read from many threads; writers must own it exclusively.
//
// Devices: a tensor on "/cpu:N" holds host memory; a tensor on "/gpu:N" holds that device's
// memory, made by engine/gpu/device_tensor.h (AllocateTensor, from the device's
// DeviceContext allocator; the buffer's deleter gives it back). Nothing copies between them
// implicitly: device_tensor.h's CopyToDevice / CopyToHost are the explicit copies (feeds,
// variables, checkpoints, results). Host accessors (raw_data, data, AsDouble, ToVector, Clone,
// SetZero, BitwiseEquals, ToProto, FromVector's) on a GPU tensor abort, naming the tensor and
// its device (a host read of device memory would crash, or on the fake read PROT_NONE
// memory); device_data / raw_device_data are the device pointer, for GPU kernels only.
#ifndef LOCKSTEP_ENGINE_TENSOR_H_
#define LOCKSTEP_ENGINE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/shape.h"
#include "lockstep/v1/tensor.pb.h"

namespace lockstep::engine {

// Memory for a tensor: a 64-byte-aligned buffer of at least `bytes`, or null (then ordinary
// memory is used). See ExecutorOptions::gradient_allocator.
using BufferAllocator = std::function<std::shared_ptr<char>(size_t bytes)>;

class Tensor {
 public:
  // An empty (null) tensor: valid() is false.
  Tensor() = default;
  // Allocates an uninitialised host buffer; `device` must be a CPU device (aborts otherwise:
  // GPU tensors come from gpu::AllocateTensor).
  Tensor(DType dtype, Shape shape, Device device = Device::Cpu());
  // A tensor over `buffer` (at least num_bytes(), 64-byte aligned), e.g. memory a transport
  // reads in place (ExecutorOptions::gradient_allocator); it lives while the tensor does.
  Tensor(DType dtype, Shape shape, std::shared_ptr<char> buffer, Device device = Device::Cpu());

  static Tensor Zeros(DType dtype, Shape shape);
  // A tensor holding `values` (of T = float, double, int32_t or int64_t).
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Shape shape);
  template <typename T>
  static Tensor Scalar(T value) {
    return FromVector<T>({value}, Shape{});
  }

  bool valid() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Device& device() const { return device_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  size_t num_bytes() const { return num_elements() * DTypeSize(dtype_); }

  // Host memory: aborts on a GPU tensor (see above).
  void* raw_data() { return HostBuffer(); }
  const void* raw_data() const { return HostBuffer(); }
  // Device memory of a GPU tensor: aborts on a host tensor.
  void* raw_device_data() { return DeviceBuffer(); }
  const void* raw_device_data() const { return DeviceBuffer(); }
  template <typename T>
  T* device_data() {
    return static_cast<T*>(raw_device_data());
  }
  template <typename T>
  const T* device_data() const {
    return static_cast<const T*>(raw_device_data());
  }
  bool on_host() const { return device_.type() == Device::Type::kCpu; }
  // The buffer's address on whatever device (identity only: aliasing checks, never read).
  const void* address() const { return buffer_.get(); }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  // Element i as a double (any dtype but f16/bf16).
  double AsDouble(int64_t i) const;
  template <typename T>
  std::vector<T> ToVector() const {
    return std::vector<T>(data<T>(), data<T>() + num_elements());
  }

  // A tensor aliasing the same buffer with another shape of the same element count.
  absl::StatusOr<Tensor> Reshaped(Shape shape) const;
  Tensor Clone() const;
  void SetZero();
  // True when dtype, shape and bytes are equal (bitwise comparison).
  bool BitwiseEquals(const Tensor& other) const;
  // How many Tensors share this buffer (the executor's buffer pool reuses unshared ones).
  long use_count() const { return buffer_.use_count(); }

  v1::TensorProto ToProto() const;
  // INVALID_ARGUMENT when the dtype is unknown, a dimension negative, or the content
  // size does not match the shape.
  static absl::StatusOr<Tensor> FromProto(const v1::TensorProto& proto);
  v1::NamedTensor ToNamedProto(absl::string_view name) const;

  std::string DebugString() const;  // "f32[2,3]"

 private:
  char* HostBuffer() const;
  char* DeviceBuffer() const;

  DType dtype_ = DType::kF32;
  Shape shape_;
  Device device_;
  std::shared_ptr<char> buffer_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_TENSOR_H_

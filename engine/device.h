// A logical device a replica runs on: "/cpu:0", "/cpu:1", ... (several logical CPU
// devices per worker, so every strategy runs without a GPU) and "/gpu:N", whose kernels are
// the ops' CUDA kernels (engine/ops/gpu_op_kernel.h over engine/kernels/gpu) behind the same
// OpKernel interface, run with the device's handles (engine/gpu/gpu_device.h). A value type.
#ifndef LOCKSTEP_ENGINE_DEVICE_H_
#define LOCKSTEP_ENGINE_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::engine {

class Device {
 public:
  enum class Type { kCpu, kCuda };

  Device() = default;
  Device(Type type, int index) : type_(type), index_(index) {}
  static Device Cpu(int index = 0) { return Device(Type::kCpu, index); }

  Type type() const { return type_; }
  int index() const { return index_; }
  // "/cpu:0", "/gpu:1".
  std::string name() const;
  // Parses "/cpu:N", "cpu:N", "/gpu:N" (case-insensitive); INVALID_ARGUMENT otherwise.
  static absl::StatusOr<Device> Parse(absl::string_view name);

  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  Type type_ = Type::kCpu;
  int index_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_DEVICE_H_

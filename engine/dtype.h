// Element types of tensors, mirroring lockstep.v1.DType (proto/lockstep/v1/tensor.proto).
// Kernels compute in f32 and f64; f16/bf16/i32/i64 tensors can be stored, serialised and
// sent through collectives, and int tensors carry labels.
#ifndef LOCKSTEP_ENGINE_DTYPE_H_
#define LOCKSTEP_ENGINE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "lockstep/v1/tensor.pb.h"

namespace lockstep::engine {

enum class DType { kF32, kF64, kF16, kBF16, kI32, kI64 };

// Bytes per element.
size_t SizeOf(DType dtype);
// "f32", "f64", ...
std::string DTypeName(DType dtype);
bool IsFloating(DType dtype);

v1::DType DTypeToProto(DType dtype);
// INVALID_ARGUMENT for DTYPE_UNSPECIFIED or an unknown value.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype);

// The DType of a C++ element type: DTypeOf<float>() == DType::kF32.
template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kF64;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kI64;
}

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_DTYPE_H_

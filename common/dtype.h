// DType: the element type of a tensor and of a collective's buffer, the one enum both engine/
// (tensors) and collectives/ (raw buffers) use, so no conversion stands between them. It
// mirrors lockstep.v1.DType's kinds (proto/lockstep/v1/tensor.proto); the one conversion to
// and from the wire enum is at the proto edge (engine/dtype.h: DTypeToProto, DTypeFromProto),
// which keeps this package free of proto dependencies.
//
// f16 and bf16 are storage types: kernels compute in f32 and f64, and the collectives reduce
// f16 and bf16 in f32 and round back after every pairwise step. Thread model: constants and
// pure functions.
#ifndef LOCKSTEP_COMMON_DTYPE_H_
#define LOCKSTEP_COMMON_DTYPE_H_

#include <cstddef>
#include <cstdint>

namespace lockstep {

enum class DType : uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64 };

// Bytes per element.
size_t DTypeSize(DType dtype);
// "f32", "f64", "f16", "bf16", "i32", "i64" ("?" for a value outside the enum).
const char* DTypeName(DType dtype);
// f32, f64, f16 and bf16.
bool IsFloating(DType dtype);

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

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_DTYPE_H_

#include "engine/dtype.h"

#include "absl/strings/str_cat.h"

namespace lockstep::engine {

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return v1::F32;
    case DType::kF64:
      return v1::F64;
    case DType::kF16:
      return v1::F16;
    case DType::kBF16:
      return v1::BF16;
    case DType::kI32:
      return v1::I32;
    case DType::kI64:
      return v1::I64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype) {
  switch (dtype) {
    case v1::F32:
      return DType::kF32;
    case v1::F64:
      return DType::kF64;
    case v1::F16:
      return DType::kF16;
    case v1::BF16:
      return DType::kBF16;
    case v1::I32:
      return DType::kI32;
    case v1::I64:
      return DType::kI64;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype ", static_cast<int>(dtype), " is not one of F32, F64, F16, BF16, I32, I64"));
  }
}

}  // namespace lockstep::engine

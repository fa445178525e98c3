#include "common/dtype.h"

namespace lockstep {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF16:
    case DType::kBF16:
      return 2;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "?";
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

}  // namespace lockstep

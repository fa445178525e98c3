#include "collectives/test_values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/reduce.h"

namespace lockstep {
namespace collectives {

double InputValue(int rank, size_t i, ReduceOp op, bool integer) {
  if (op == ReduceOp::kProd) {
    double v = ((rank + i) % 3 == 0) ? 2 : 1;
    if (!integer && (rank * 7 + i) % 4 == 1) v = 1.5;
    return (i + rank) % 5 == 0 ? -v : v;
  }
  double v = static_cast<double>((rank * 31 + i * 17) % 201) - 100;
  return integer ? v : v / 8;
}

void StoreValue(DType dt, void* buf, size_t i, double v) {
  switch (dt) {
    case DType::kF32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case DType::kF64:
      static_cast<double*>(buf)[i] = v;
      break;
    case DType::kF16:
      static_cast<uint16_t*>(buf)[i] = FloatToHalf(v);
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(buf)[i] = FloatToBFloat16(v);
      break;
    case DType::kI32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case DType::kI64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      break;
  }
}

double LoadValue(DType dt, const void* buf, size_t i) {
  switch (dt) {
    case DType::kF32:
      return static_cast<const float*>(buf)[i];
    case DType::kF64:
      return static_cast<const double*>(buf)[i];
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DType::kBF16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DType::kI32:
      return static_cast<const int32_t*>(buf)[i];
    case DType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}

double Tolerance(DType dt, double ref, int n) {
  double rel = 0;
  switch (dt) {
    case DType::kF32:
      rel = 1e-6;
      break;
    case DType::kF64:
      rel = 1e-12;
      break;
    case DType::kF16:
      rel = 2e-3;
      break;
    case DType::kBF16:
      rel = 1.6e-2;
      break;
    default:
      return 0;
  }
  return rel * n * std::max(std::fabs(ref), 1.0) * 2;
}

void FillInput(DType dt, void* buf, size_t count, int rank, ReduceOp op, size_t first) {
  for (size_t i = 0; i < count; ++i) {
    StoreValue(dt, buf, i, InputValue(rank, first + i, op, IsInteger(dt)));
  }
}

double Reference(int n, size_t i, ReduceOp op, DType dt) {
  const bool integer = IsInteger(dt);
  // Rank r's input as it holds it (rounded to the dtype).
  auto input = [&](int r) {
    char tmp[8];
    StoreValue(dt, tmp, 0, InputValue(r, i, op, integer));
    return LoadValue(dt, tmp, 0);
  };
  double acc = input(0);
  for (int r = 1; r < n; ++r) {
    const double x = input(r);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        acc += x;
        break;
      case ReduceOp::kProd:
        acc *= x;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, x);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, x);
        break;
    }
  }
  if (op == ReduceOp::kMean) acc = integer ? std::trunc(acc / n) : acc / n;
  return acc;
}

}  // namespace collectives
}  // namespace lockstep

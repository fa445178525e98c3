// Which NCCL data type and reduction operator each DType and ReduceOp becomes: the mapping
// RealNcclApi passes to NCCL, as the numbers of nccl.h's ncclDataType_t and ncclRedOp_t, in a
// header that does not need nccl.h, so that every build tests it (nccl_codes_test) without a
// GPU. real_nccl_api.cc checks each number against nccl.h's enumerator at compile time
// (--config=cuda). Pure functions.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_NCCL_CODES_H_
#define LOCKSTEP_COLLECTIVES_NCCL_NCCL_CODES_H_

#include "collectives/types.h"

namespace lockstep::collectives::nccl {

// ncclDataType_t's values (nccl.h) for the types we send.
enum class NcclDataType : int {
  kInt32 = 2,
  kInt64 = 4,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};

// ncclRedOp_t's values (nccl.h). NCCL numbers max before min.
enum class NcclRedOp : int {
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
  kAvg = 4,
};

constexpr NcclDataType NcclDataTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return NcclDataType::kFloat32;
    case DType::kF64:
      return NcclDataType::kFloat64;
    case DType::kF16:
      return NcclDataType::kFloat16;
    case DType::kBF16:
      return NcclDataType::kBfloat16;
    case DType::kI32:
      return NcclDataType::kInt32;
    case DType::kI64:
      return NcclDataType::kInt64;
  }
  return NcclDataType::kFloat32;
}

// kMean is ncclAvg: NCCL divides by the number of ranks itself.
constexpr NcclRedOp NcclRedOpOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return NcclRedOp::kSum;
    case ReduceOp::kProd:
      return NcclRedOp::kProd;
    case ReduceOp::kMin:
      return NcclRedOp::kMin;
    case ReduceOp::kMax:
      return NcclRedOp::kMax;
    case ReduceOp::kMean:
      return NcclRedOp::kAvg;
  }
  return NcclRedOp::kSum;
}

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_NCCL_CODES_H_

// The DType and ReduceOp -> NCCL mapping RealNcclApi uses, in every build (no GPU, no NCCL).
// The numbers are nccl.h's; real_nccl_api.cc asserts the same numbers against nccl.h under
// --config=cuda.
#include "collectives/nccl/nccl_codes.h"

#include <set>

#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

TEST(NcclCodesTest, EachDTypeIsItsNcclType) {
  EXPECT_EQ(NcclDataTypeOf(DType::kF32), NcclDataType::kFloat32);
  EXPECT_EQ(NcclDataTypeOf(DType::kF64), NcclDataType::kFloat64);
  EXPECT_EQ(NcclDataTypeOf(DType::kF16), NcclDataType::kFloat16);
  EXPECT_EQ(NcclDataTypeOf(DType::kBF16), NcclDataType::kBfloat16);
  EXPECT_EQ(NcclDataTypeOf(DType::kI32), NcclDataType::kInt32);
  EXPECT_EQ(NcclDataTypeOf(DType::kI64), NcclDataType::kInt64);
  // nccl.h: ncclInt32 2, ncclInt64 4, ncclFloat16 6, ncclFloat32 7, ncclFloat64 8,
  // ncclBfloat16 9.
  EXPECT_EQ(static_cast<int>(NcclDataTypeOf(DType::kI32)), 2);
  EXPECT_EQ(static_cast<int>(NcclDataTypeOf(DType::kI64)), 4);
  EXPECT_EQ(static_cast<int>(NcclDataTypeOf(DType::kF16)), 6);
  EXPECT_EQ(static_cast<int>(NcclDataTypeOf(DType::kF32)), 7);
  EXPECT_EQ(static_cast<int>(NcclDataTypeOf(DType::kF64)), 8);
  EXPECT_EQ(static_cast<int>(NcclDataTypeOf(DType::kBF16)), 9);
}

TEST(NcclCodesTest, EachReduceOpIsItsNcclOp) {
  // nccl.h: ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4 (max before min).
  EXPECT_EQ(static_cast<int>(NcclRedOpOf(ReduceOp::kSum)), 0);
  EXPECT_EQ(static_cast<int>(NcclRedOpOf(ReduceOp::kProd)), 1);
  EXPECT_EQ(static_cast<int>(NcclRedOpOf(ReduceOp::kMax)), 2);
  EXPECT_EQ(static_cast<int>(NcclRedOpOf(ReduceOp::kMin)), 3);
  EXPECT_EQ(static_cast<int>(NcclRedOpOf(ReduceOp::kMean)), 4);
}

TEST(NcclCodesTest, NoTwoOfOursShareAnNcclValue) {
  std::set<int> types, ops;
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
    types.insert(static_cast<int>(NcclDataTypeOf(d)));
  }
  for (ReduceOp o :
       {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kMean}) {
    ops.insert(static_cast<int>(NcclRedOpOf(o)));
  }
  EXPECT_EQ(types.size(), 6u);
  EXPECT_EQ(ops.size(), 5u);
}

}  // namespace
}  // namespace lockstep::collectives::nccl

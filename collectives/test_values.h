// Test inputs and serial references for the collective matrices (allreduce_matrix_test,
// collectives_matrix_test): element i of rank r's input, stored in any dtype, and what
// reducing every rank's element i must give. Test-only.
#ifndef LOCKSTEP_COLLECTIVES_TEST_VALUES_H_
#define LOCKSTEP_COLLECTIVES_TEST_VALUES_H_

#include <cstddef>

#include "collectives/types.h"

namespace lockstep {
namespace collectives {

inline constexpr DType kTestDTypes[] = {DType::kF32,  DType::kF64, DType::kF16,
                                        DType::kBF16, DType::kI32, DType::kI64};
inline constexpr ReduceOp kTestOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                        ReduceOp::kMax, ReduceOp::kMean};

inline bool IsInteger(DType dt) { return dt == DType::kI32 || dt == DType::kI64; }

// Rank r's element i for a reduction by `op`: small integers (eighths for floats), so that
// sums are exact in f32 and f64; products stay within range.
double InputValue(int rank, size_t i, ReduceOp op, bool integer);

// Element i of a `dt` buffer, as a double.
void StoreValue(DType dt, void* buf, size_t i, double v);
double LoadValue(DType dt, const void* buf, size_t i);

// Fills `buf` (count elements of `dt`) with rank r's input for `op`, elements starting at
// `first` (element i of buf holds InputValue(rank, first + i, ...)).
void FillInput(DType dt, void* buf, size_t count, int rank, ReduceOp op, size_t first = 0);

// The reduction over ranks 0..n-1 of InputValue(r, i, op) as each rank holds it (rounded to
// `dt`), in the order a serial loop takes them; MEAN truncates for integers.
double Reference(int n, size_t i, ReduceOp op, DType dt);

// How far a float result may be from Reference: 16-bit types round each step's partial sum.
double Tolerance(DType dt, double ref, int n);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TEST_VALUES_H_

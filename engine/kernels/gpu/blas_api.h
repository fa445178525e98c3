// BlasApi: the GPU device's matrix products (GEMM with an optional fused epilogue: a bias add,
// then ReLU or GELU), behind an interface so that the code that calls it is tested without a
// GPU. Our interface is row-major, as the engine's tensors are; cuBLAS is column-major. The
// translation is made once, in ToColumnMajor below, and both sides run its result:
// RealBlasApi (--config=cuda) hands it to cuBLASLt, FakeBlasApi executes it with cuBLAS's
// column-major contract over the CPU GEMM on FakeCudaApi's memory. A transposition or a
// leading dimension wrong in the translation therefore fails the same contract test
// (blas_api_contract_test.h) on the CPU that it would fail on a GPU.
//
// Semantics (row-major): C[m, n] = epilogue(alpha * op(A) * op(B) + beta * C), op(A) [m, k]
// (A stored [k, m] when trans_a), op(B) [k, n] (B stored [n, k] when trans_b), all packed
// (leading dimension = stored row length). A and B are f32, or both bf16 (GemmOperands::kBF16,
// mixed precision: cuBLASLt's CUDA_R_16BF operands with CUBLAS_COMPUTE_32F, on tensor cores);
// C, alpha, beta and the bias are f32 and the products accumulate in f32 either way. Epilogues:
// bias[n] is added to every row; ReLU is max(x, 0); GELU is cuBLASLt's tanh approximation, 0.5 x (1
// + tanh(sqrt(2/pi) (x + 0.044715 x^3))), NOT the engine's exact GELU op (which therefore never
// fuses into a product). Calls are enqueued on the stream and return at once.
// TF32 (allow_tf32, per call: the job's choice, ModelSpec; the BlasApi outlives jobs): f32
// operands may be multiplied as TF32, each rounded to a 10-bit mantissa (RoundToTf32, to
// nearest even) with f32 accumulation, as tensor cores do; cuBLASLt's
// CUBLAS_COMPUTE_32F_FAST_TF32. Off: true f32 (CUBLAS_COMPUTE_32F). bf16 operands ignore it.
//
// Errors at the call: INVALID_ARGUMENT "BlasApi::Gemm: ..." for a negative dimension, k = 0 with
// an output (cuBLASLt has no such product), a null buffer with elements, a bias epilogue without a
// bias (or a bias without one); the real side adds cuBLAS's errors (INTERNAL naming the cuBLAS call
// and status; UNAVAILABLE when cuBLASLt cannot be loaded), the fake the buffers that lie outside
// device memory. Thread model: implementations are thread-safe; a stream is used by one thread at a
// time.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_BLAS_API_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_BLAS_API_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "common/cuda/cuda_api.h"

namespace lockstep::engine::gpu {

enum class Epilogue { kNone, kBias, kRelu, kBiasRelu, kGelu, kBiasGelu };
bool EpilogueHasBias(Epilogue e);
const char* EpilogueName(Epilogue e);

// The element type of A and B: f32, or bf16 (uint16_t bits, common/bfloat16.h).
enum class GemmOperands { kF32, kBF16 };
const char* GemmOperandsName(GemmOperands o);
// Bytes per element of A and B.
size_t OperandBytes(GemmOperands o);

// One row-major product (see above). Device pointers; a and b point to `operands` elements.
struct GemmArgs {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  float beta = 0;
  float* c = nullptr;
  Epilogue epilogue = Epilogue::kNone;
  const float* bias = nullptr;  // n elements, for the bias epilogues
  GemmOperands operands = GemmOperands::kF32;
  bool allow_tf32 = false;  // f32 operands only (see above)
};

// The same product as cuBLAS sees it, column-major: C_cm[rows, cols] (ldc) =
// op_a(A_cm) [rows, depth] * op_b(B_cm) [depth, cols], bias[rows] added to each column.
struct ColumnMajorGemm {
  bool trans_a = false;  // CUBLAS_OP_T on the first operand
  bool trans_b = false;
  int64_t rows = 0, cols = 0, depth = 0;
  float alpha = 1;
  const void* a = nullptr;
  int64_t lda = 1;
  const void* b = nullptr;
  int64_t ldb = 1;
  float beta = 0;
  float* c = nullptr;
  int64_t ldc = 1;
  Epilogue epilogue = Epilogue::kNone;
  const float* bias = nullptr;  // rows elements
  GemmOperands operands = GemmOperands::kF32;
  bool allow_tf32 = false;
};

// What a product's cuBLASLt descriptors, layouts and algorithm depend on: everything of the
// column-major product but its pointers, alpha and beta (set per call). RealBlasApi caches
// one plan per key, so the heuristic runs once per shape and not on every call.
struct GemmPlanKey {
  bool trans_a = false, trans_b = false;
  int64_t rows = 0, cols = 0, depth = 0, lda = 0, ldb = 0, ldc = 0;
  Epilogue epilogue = Epilogue::kNone;
  GemmOperands operands = GemmOperands::kF32;
  bool allow_tf32 = false;  // the compute type is part of the descriptor

  static GemmPlanKey Of(const ColumnMajorGemm& g);
  friend bool operator==(const GemmPlanKey& x, const GemmPlanKey& y) { return x.Tie() == y.Tie(); }
  template <typename H>
  friend H AbslHashValue(H h, const GemmPlanKey& k) {
    return H::combine(std::move(h), k.Tie());
  }

 private:
  using Tuple =
      std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool>;
  Tuple Tie() const {
    return Tuple(trans_a, trans_b, rows, cols, depth, lda, ldb, ldc, static_cast<int>(epilogue),
                 static_cast<int>(operands), allow_tf32);
  }
};
// x rounded to TF32 (10 explicit mantissa bits, to nearest even, exponent kept): what a
// tensor core multiplies when TF32 is allowed. NaN and infinities are kept.
inline float RoundToTf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // NaN, infinity
  bits += 0x0fffu + ((bits >> 13) & 1u);              // to nearest, ties to even
  bits &= ~0x1fffu;
  float y;
  std::memcpy(&y, &bits, sizeof(y));
  return y;
}

// The launch-time checks of both sides (errors as above).
absl::Status CheckGemm(const GemmArgs& args);
// A row-major C is a column-major C^T: C^T = op(B)^T op(A)^T, so cuBLAS's first operand is
// our B and its second our A, with the transpositions kept and the dimensions swapped.
ColumnMajorGemm ToColumnMajor(const GemmArgs& args);

class BlasApi {
 public:
  virtual ~BlasApi() = default;
  virtual absl::Status Gemm(const GemmArgs& args, CudaStream stream) = 0;
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_BLAS_API_H_

// FakeBlasApi: BlasApi without a GPU. It receives the column-major product that the real side
// hands cuBLASLt (ToColumnMajor in blas_api.h) and executes it with cuBLAS's contract
// (column-major operands, their transpositions and leading dimensions, the bias per row of
// the column-major result, then the activation) over the CPU GEMM (engine/kernels/cpu/blas.h)
// on FakeCudaApi's host views, on the stream (lazily, as every fake launch). A transposed
// product or a wrong leading dimension in the translation gives a wrong product or an error
// here, as it would on a GPU.
//
// Exactness: C_cm^T is the row-major product the CPU kernels compute, so the fake calls
// cpu::Gemm with the same dimensions and transpositions as the engine's CPU MatMul does:
// its products are bitwise the CPU's. The bias is added after the product (one rounding) and
// the activation applied after that, as the CPU's MatMul -> BiasAdd -> ReLU do.
// bf16 operands (GemmOperands::kBF16) are widened to f32 (exactly) and multiplied by the same
// CPU GEMM: every product of two bf16 values is exact in f32, so this is a bf16-input,
// f32-accumulate product, and bitwise the engine's CPU BF16_MIXED product, which hands cpu::Gemm
// the same rounded values (engine/ops/products.h). A GPU sums in its own order.
// Limits: operands must be packed (leading dimension = the stored column length; our
// translation always gives that); cuBLAS would accept a larger one, the fake says so.
//
// Ownership: borrows the fake, which must outlive it. Thread model: thread-safe.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_FAKE_BLAS_API_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_FAKE_BLAS_API_H_

#include <atomic>

#include "common/cuda/fake_cuda_api.h"
#include "engine/kernels/gpu/blas_api.h"

namespace lockstep::engine::gpu {

class FakeBlasApi final : public BlasApi {
 public:
  explicit FakeBlasApi(FakeCudaApi* fake) : fake_(fake) {}

  // CheckGemm, then the column-major product's checks (INVALID_ARGUMENT "FakeBlasApi::Gemm"
  // naming the operand: a leading dimension below cuBLAS's minimum or not packed, a buffer
  // outside the fake's device memory), then enqueued on `stream`.
  absl::Status Gemm(const GemmArgs& args, CudaStream stream) override;
  // The column-major product as cuBLAS takes it (what Gemm runs after ToColumnMajor).
  absl::Status ColumnMajor(const ColumnMajorGemm& g, CudaStream stream);
  // How many products were enqueued (tests).
  int64_t calls() const { return calls_.load(); }

 private:
  FakeCudaApi* const fake_;
  std::atomic<int64_t> calls_{0};
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_FAKE_BLAS_API_H_

// RealBlasApi: BlasApi over cuBLASLt, loaded at run time (common/cuda/shared_library, as NCCL
// is), so a --config=cuda binary starts on a host without cuBLAS and says what is missing only
// when a product is asked for. Each Gemm translates once (ToColumnMajor, shared with the fake),
// describes the operands, asks cuBLASLt's heuristic for an algorithm within the workspace and
// enqueues cublasLtMatmul on the stream. Compute is CUBLAS_COMPUTE_32F (true f32) unless the
// call allows TF32 (GemmArgs::allow_tf32: CUBLAS_COMPUTE_32F_FAST_TF32, ~1e-3 relative). bf16
// operands (GemmOperands::kBF16) are CUDA_R_16BF layouts with CUBLAS_COMPUTE_32F and C in
// CUDA_R_32F: tensor-core products accumulated in f32 (allow_tf32 does not apply).
//
// Errors: UNAVAILABLE naming libcublasLt.so.13 when it cannot be loaded (Create); INTERNAL
// "cuBLASLt <call>: <status name>" for a cuBLAS failure, in this one place.
// Ownership: owns the cuBLASLt handle and a workspace of Options::workspace_bytes on the
// device current at Create (one RealBlasApi per device); borrows the CudaApi, which must
// outlive it. Thread model: thread-safe (cuBLASLt handles are; descriptors are per call).
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_REAL_BLAS_API_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_REAL_BLAS_API_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/cuda/cuda_api.h"
#include "common/cuda/shared_library.h"
#include "engine/kernels/gpu/blas_api.h"

namespace lockstep::engine::gpu {

class RealBlasApi final : public BlasApi {
 public:
  struct Options {
    size_t workspace_bytes = size_t{32} << 20;
  };
  static absl::StatusOr<std::unique_ptr<RealBlasApi>> Create(CudaApi* api, Options options);
  static absl::StatusOr<std::unique_ptr<RealBlasApi>> Create(CudaApi* api) {
    return Create(api, Options());
  }
  ~RealBlasApi() override;

  absl::Status Gemm(const GemmArgs& args, CudaStream stream) override;

 private:
  struct Functions;
  RealBlasApi(CudaApi* api, Options options, std::unique_ptr<SharedLibrary> library,
              std::unique_ptr<Functions> f, void* handle, void* workspace);

  CudaApi* const api_;
  const Options options_;
  const std::unique_ptr<SharedLibrary> library_;
  const std::unique_ptr<Functions> f_;
  void* const handle_;     // cublasLtHandle_t
  void* const workspace_;  // device memory
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_REAL_BLAS_API_H_

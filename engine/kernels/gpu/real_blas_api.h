// RealBlasApi: BlasApi over cuBLASLt, loaded at run time (common/cuda/shared_library, as NCCL
// is), so a --config=cuda binary starts on a host without cuBLAS and says what is missing only
// when a product is asked for. Each Gemm translates once (ToColumnMajor, shared with the fake)
// and enqueues cublasLtMatmul on the stream with the plan of its GemmPlanKey (blas_api.h: the
// shape, transpositions, leading dimensions, epilogue and operand type): the matmul
// descriptor, the three layouts and the algorithm cuBLASLt's heuristic picked within the
// workspace, made at the first call of that key and reused after (the heuristic costs tens of
// microseconds of host time; a training step repeats the same few shapes). At most kMaxPlans
// plans; a full cache is emptied. Only the bias pointer is set per call. Compute is
// CUBLAS_COMPUTE_32F (true f32) unless the call allows TF32 (GemmArgs::allow_tf32, the job's
// Precision.TF32: CUBLAS_COMPUTE_32F_FAST_TF32, ~1e-3 relative). bf16 operands
// (GemmOperands::kBF16) are CUDA_R_16BF layouts with CUBLAS_COMPUTE_32F and C in CUDA_R_32F:
// tensor-core products accumulated in f32 (allow_tf32 does not apply).
//
// Errors: UNAVAILABLE naming libcublasLt.so.13 when it cannot be loaded (Create); INTERNAL
// "cuBLASLt <call>: <status name>" for a cuBLAS failure, in this one place.
// Ownership: owns the cuBLASLt handle and a workspace of Options::workspace_bytes on the
// device current at Create (one RealBlasApi per device), and its plans; borrows the CudaApi,
// which must outlive it. Thread model: thread-safe (one mutex over the plans, held while a
// call sets its bias pointer and enqueues).
//
// The workspace: 32 MiB by default, what PyTorch gives cuBLAS(Lt) on Hopper (its default
// CUBLAS_WORKSPACE_CONFIG on sm90 is :4096:8, 8 x 4 MiB, and cuBLASLt shares that size since
// torch 2.5): some of the fastest sm90 kernels for large f32/bf16 products (split-K among them)
// need more than the few MiB older defaults allowed, and the heuristic only offers algorithms
// that fit. It is allocated once per device. Options::workspace_bytes changes it (a smaller
// one for a device short of memory, a larger one to try whether the heuristic picks better).
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_REAL_BLAS_API_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_REAL_BLAS_API_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
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

  static constexpr size_t kMaxPlans = 256;
  struct PlanCacheStats {
    int64_t plans = 0;      // cached now
    int64_t hits = 0;       // calls that reused a plan
    int64_t misses = 0;     // calls that made one (ran the heuristic)
    int64_t evictions = 0;  // times the full cache was emptied
  };
  PlanCacheStats plan_cache_stats() const;

 private:
  struct Functions;
  struct Plan;
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(const ColumnMajorGemm& g) const;
  RealBlasApi(CudaApi* api, Options options, std::unique_ptr<SharedLibrary> library,
              std::unique_ptr<Functions> f, void* handle, void* workspace);

  CudaApi* const api_;
  const Options options_;
  const std::unique_ptr<SharedLibrary> library_;
  const std::unique_ptr<Functions> f_;
  void* const handle_;     // cublasLtHandle_t
  void* const workspace_;  // device memory
  mutable absl::Mutex mu_;
  absl::flat_hash_map<GemmPlanKey, std::unique_ptr<Plan>> plans_ ABSL_GUARDED_BY(mu_);
  PlanCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_REAL_BLAS_API_H_

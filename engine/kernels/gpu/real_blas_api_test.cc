// BlasApi's contract (blas_api_contract_test.h) on a GPU (requires-gpu): RealBlasApi over
// cuBLASLt on RealCudaApi, TF32 off, against the same exact references as the fake.
#include "engine/kernels/gpu/real_blas_api.h"

#include "common/cuda/real_cuda_api.h"
#include "engine/kernels/gpu/blas_api_contract_test.h"

namespace lockstep::engine::gpu {
namespace {

struct RealBackend {
  static absl::StatusOr<BlasBackend> Make() {
    absl::StatusOr<std::unique_ptr<RealCudaApi>> api = RealCudaApi::Create();
    if (!api.ok()) return api.status();
    absl::StatusOr<std::unique_ptr<RealBlasApi>> blas = RealBlasApi::Create(api->get());
    if (!blas.ok()) return blas.status();
    BlasBackend b;
    b.api = *std::move(api);
    b.blas = *std::move(blas);
    return b;
  }
};

using RealBackends = ::testing::Types<RealBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Real, BlasApiContractTest, RealBackends);

}  // namespace
}  // namespace lockstep::engine::gpu

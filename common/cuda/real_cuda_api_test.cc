// The CudaApi contract on a GPU (requires-gpu): the same test body the fake passes in CPU CI.
#include "common/cuda/real_cuda_api.h"

#include "common/cuda/cuda_api_contract_test.h"
#include "gtest/gtest.h"

namespace lockstep {

struct RealFactory {
  static absl::StatusOr<std::unique_ptr<CudaApi>> Make() {
    absl::StatusOr<std::unique_ptr<RealCudaApi>> real = RealCudaApi::Create();
    if (!real.ok()) return real.status();
    return std::unique_ptr<CudaApi>(std::move(*real));
  }
};

using RealTypes = ::testing::Types<RealFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(Real, CudaApiContractTest, RealTypes);

}  // namespace lockstep

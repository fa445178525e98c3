// DeviceContext's test body on a GPU (requires-gpu): the same body the fake passes in CPU CI.
#include "common/cuda/real_cuda_api.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/device_context_test_body.h"

namespace lockstep::engine::gpu {

struct RealFactory {
  static absl::StatusOr<std::unique_ptr<CudaApi>> Make() {
    absl::StatusOr<std::unique_ptr<RealCudaApi>> real = RealCudaApi::Create();
    if (!real.ok()) return real.status();
    return std::unique_ptr<CudaApi>(std::move(*real));
  }
};

using RealTypes = ::testing::Types<RealFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(Real, DeviceContextTest, RealTypes);

}  // namespace lockstep::engine::gpu

// The optimizer tests (optimizer_test_body.h) on a real GPU (requires-gpu): f32 variables and
// slots in device memory, each update against the closed forms and the CPU's f32 bits.
#include "engine/optimizer_test_body.h"
#include "engine/real_gpu_env.h"

namespace lockstep::engine {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<RealGpuEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, OptimizerTest, Devices);

}  // namespace lockstep::engine

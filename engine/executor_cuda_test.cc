// The executor tests (executor_test_body.h) on a real GPU (requires-gpu): variables and gradients
// in device memory, hooks acting on the device's stream.
#include "engine/executor_test_body.h"
#include "engine/real_gpu_env.h"

namespace lockstep::engine {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<RealGpuEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, ExecutorTest, Devices);

}  // namespace lockstep::engine

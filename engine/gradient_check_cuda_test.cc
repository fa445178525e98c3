// The gradient checks (gradient_check_test_body.h) on a real GPU (requires-gpu): RealCudaApi,
// the CUDA kernels and cuBLASLt (TF32 off), the device's f32 gradients against f64 finite
// differences and against the CPU's f32 gradients.
#include "engine/gradient_check_test_body.h"
#include "engine/real_gpu_env.h"

namespace lockstep::engine {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<RealGpuEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, GradientCheck, Devices);

}  // namespace lockstep::engine

// The device-generic engine tests (device_generic_test_body.h) on a real GPU (requires-gpu):
// RealCudaApi, the CUDA kernels and cuBLASLt (TF32 off), "/gpu:0" against "/cpu:0".
#include "engine/device_generic_test_body.h"
#include "engine/real_gpu_env.h"

namespace lockstep::engine {

using Devices = ::testing::Types<RealGpuEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, DeviceGenericTest, Devices);

}  // namespace lockstep::engine

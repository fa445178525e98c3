// The sequence-model op tests (seq_ops_test_body.h) on a real GPU (requires-gpu): RealCudaApi,
// the CUDA kernels and cuBLASLt (TF32 off), "/gpu:0" against "/cpu:0".
#include "engine/real_gpu_env.h"
#include "engine/seq_ops_test_body.h"

namespace lockstep::engine {

using Devices = ::testing::Types<RealGpuEnv>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, SeqOpsTest, Devices);

}  // namespace lockstep::engine

// The gradient checks (gradient_check_test_body.h) on "/cpu:0" and on the fake "/gpu:0"
// (FakeCudaApi, the grid emulator, FakeBlasApi), plus the cases that are CPU-only.
#include "engine/gradient_check_test_body.h"

namespace lockstep::engine {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<BitwiseCpu, BitwiseFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, GradientCheck, Devices);

namespace {

void CheckGradients(const GradCase& c) {
  CpuDeviceEnv cpu;
  CheckGradientsOn(cpu, /*bitwise=*/true, c);
}

// CPU-only: MEAN_SQUARED_ERROR has no CUDA kernel (the executor refuses it on a GPU,
// DeviceGenericTest.MisuseIsRefusedNamingTheDevice).
TEST(GradientCheck, MeanSquaredError) {
  CheckGradients({{Shape{3, 4}, Shape{3, 4}}, [](Graph* g, const std::vector<int>& v) {
                    return g->Op(v1::MEAN_SQUARED_ERROR, {v[0], v[1]});
                  }});
}

// CPU-only: synchronized statistics have no CUDA kernel yet (BatchNormGpuKernel refuses them).
// TODO(#32): instantiate it on "/gpu:0" once the GPU kernel sums across replicas.
// Synchronized batch norm in a sync group of one (the sum over replicas is the identity):
// its own forward and backward code, two sums forward and one backward per step.
TEST(GradientCheck, SynchronizedBatchNorm) {
  int sums = 0;
  GradCase c{{Shape{5, 2, 3}, Shape{3}, Shape{3}},
             [](Graph* g, const std::vector<int>& v) {
               return g->BatchNorm({v[0], v[1], v[2], g->FindInput("mm"), g->FindInput("mv")}, 0.9f,
                                   1e-3f, "", 0, /*synchronized=*/true);
             },
             {{"mm", Tensor::FromVector<double>({0.1, -0.2, 0.3}, Shape{3})},
              {"mv", Tensor::FromVector<double>({0.5, 1.0, 2.0}, Shape{3})}}};
  c.options.cross_replica_sum = [&sums](Tensor*) {
    ++sums;
    return absl::OkStatus();
  };
  CheckGradients(c);
  // One step with gradients, then two forward-and-backward steps per element of the 36.
  EXPECT_EQ(sums, 3 * (1 + 2 * 36));
}

}  // namespace
}  // namespace lockstep::engine

// The convolutional models' device-generic tests (device_generic_cnn_test_body.h) on "/cpu:0",
// on the fake "/gpu:0" (FakeCudaApi, the grid emulator, FakeBlasApi) and on the same fake with a
// grid of 2 blocks of 64 threads, so that every grid-stride loop of the kernels turns.
#include "engine/device_generic_cnn_test_body.h"

namespace lockstep::engine {

// The MLP tests of device_generic_test_body.h run in device_generic_test; this binary
// instantiates only the CNN suite that derives from their fixture.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<BitwiseCpu, BitwiseFakeGpu, BitwiseSmallGridFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, DeviceGenericCnnTest, Devices);

}  // namespace lockstep::engine

// The device-generic engine tests (device_generic_test_body.h) on "/cpu:0" and on the fake
// "/gpu:0" (FakeCudaApi, the grid emulator, FakeBlasApi): CPU CI runs every GPU instance.
#include "engine/device_generic_test_body.h"

namespace lockstep::engine {

using Devices = ::testing::Types<BitwiseCpu, BitwiseFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, DeviceGenericTest, Devices);

}  // namespace lockstep::engine

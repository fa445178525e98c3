// The convolutional models' device-generic tests (device_generic_cnn_test_body.h) on "/cpu:0",
// on the fake "/gpu:0" (FakeCudaApi, the grid emulator, FakeBlasApi) and on the same fake with a
// grid of 2 blocks of 64 threads, so that every grid-stride loop of the kernels turns.
#include "engine/device_generic_cnn_test_body.h"

namespace lockstep::engine {

// The MLP tests of device_generic_test_body.h run in device_generic_test; this binary
// instantiates only the CNN suite that derives from their fixture.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

struct Cpu : CpuEnv {
  static constexpr bool kBitwise = true;
};
struct FakeGpu : FakeGpuEnv {
  static constexpr bool kBitwise = true;
};
struct FakeGpuSmallGrid {
  static constexpr bool kBitwise = true;
  static absl::StatusOr<std::unique_ptr<DeviceEnv>> Make() {
    gpu::EmulatedKernels::Options grid;
    grid.seed = 7;
    grid.max_blocks = 2;
    grid.threads = 64;
    return FakeGpuEnv::MakeWith(grid);
  }
};

using Devices = ::testing::Types<Cpu, FakeGpu, FakeGpuSmallGrid>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, DeviceGenericCnnTest, Devices);

}  // namespace lockstep::engine

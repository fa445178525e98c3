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
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{256} << 20;
    LS_ASSIGN_OR_RETURN(std::unique_ptr<FakeCudaApi> fake, FakeCudaApi::Create(options));
    LS_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceContext> context,
                        gpu::DeviceContext::Create(fake.get(), 0));
    gpu::EmulatedKernels::Options grid;
    grid.seed = 7;
    grid.max_blocks = 2;
    grid.threads = 64;
    auto kernels = std::make_unique<gpu::EmulatedKernels>(fake.get(), grid);
    auto blas = std::make_unique<gpu::FakeBlasApi>(fake.get());
    return std::unique_ptr<DeviceEnv>(
        new GpuDeviceEnv(std::move(fake), std::move(context), std::move(kernels), std::move(blas)));
  }
};

using Devices = ::testing::Types<Cpu, FakeGpu, FakeGpuSmallGrid>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, DeviceGenericCnnTest, Devices);

}  // namespace lockstep::engine

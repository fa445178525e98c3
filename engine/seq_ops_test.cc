// The sequence-model op tests (seq_ops_test_body.h) on "/cpu:0" and on the fake "/gpu:0"
// (FakeCudaApi, the grid emulator, FakeBlasApi): CPU CI runs every GPU kernel. The fake runs
// twice: with full grids, and with grids of at most 2 blocks of 64 threads so that every
// grid-stride loop of the kernels turns.
#include "engine/seq_ops_test_body.h"

namespace lockstep::engine {

struct Cpu : CpuEnv {
  static constexpr bool kBitwise = true;
};
struct FakeGpu : FakeGpuEnv {
  static constexpr bool kBitwise = true;
};
struct SmallGridFakeGpu {
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

using Devices = ::testing::Types<Cpu, FakeGpu, SmallGridFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, SeqOpsTest, Devices);

}  // namespace lockstep::engine

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
    gpu::EmulatedKernels::Options grid;
    grid.seed = 7;
    grid.max_blocks = 2;
    grid.threads = 64;
    return FakeGpuEnv::MakeWith(grid);
  }
};

using Devices = ::testing::Types<Cpu, FakeGpu, SmallGridFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, SeqOpsTest, Devices);

}  // namespace lockstep::engine

// GpuKernels' test body (gpu_kernels_test_body.h) on the grid emulator over FakeCudaApi: a
// full grid, and a grid of 2 blocks of 64 threads so that every grid-stride and row loop turns.
#include "engine/kernels/gpu/emulated_kernels.h"

#include "engine/kernels/gpu/gpu_kernels_test_body.h"

namespace lockstep::engine::gpu {

template <int kMaxBlocks, int kThreads>
struct EmulatedBackend {
  static absl::StatusOr<GpuBackend> Make() {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{256} << 20;
    absl::StatusOr<std::unique_ptr<FakeCudaApi>> fake = FakeCudaApi::Create(options);
    if (!fake.ok()) return fake.status();
    GpuBackend b;
    EmulatedKernels::Options k;
    k.seed = 42;
    k.max_blocks = kMaxBlocks;
    k.threads = kThreads;
    b.kernels = std::make_unique<EmulatedKernels>(fake->get(), k);
    b.api = *std::move(fake);
    return b;
  }
};

using EmulatedBackends =
    ::testing::Types<EmulatedBackend<kMaxBlocks, kThreadsPerBlock>, EmulatedBackend<2, 64>>;
INSTANTIATE_TYPED_TEST_SUITE_P(Emulated, GpuKernelsTest, EmulatedBackends);

}  // namespace lockstep::engine::gpu

// The sequence-model op tests (seq_ops_test_body.h) on "/cpu:0" and on the fake "/gpu:0"
// (FakeCudaApi, the grid emulator, FakeBlasApi): CPU CI runs every GPU kernel.
#include "engine/seq_ops_test_body.h"

namespace lockstep::engine {

struct Cpu : CpuEnv {
  static constexpr bool kBitwise = true;
};
struct FakeGpu : FakeGpuEnv {
  static constexpr bool kBitwise = true;
};

using Devices = ::testing::Types<Cpu, FakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, SeqOpsTest, Devices);

}  // namespace lockstep::engine

// The sequence-model op tests (seq_ops_test_body.h) on "/cpu:0" and on the fake "/gpu:0"
// (FakeCudaApi, the grid emulator, FakeBlasApi): CPU CI runs every GPU kernel. The fake runs
// twice: with full grids, and with grids of at most 2 blocks of 64 threads so that every
// grid-stride loop of the kernels turns.
#include "engine/seq_ops_test_body.h"

namespace lockstep::engine {

using Devices = ::testing::Types<BitwiseCpu, BitwiseFakeGpu, BitwiseSmallGridFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, SeqOpsTest, Devices);

}  // namespace lockstep::engine

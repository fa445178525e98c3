// FakeNcclFixture: the fixture of the NCCL communicator's host-side tests: an in-memory
// rendezvous store, FakeNcclApi, the attempt's AbortSignal and options over them.
// Thread model: as the test's.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_FIXTURE_H_
#define LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_FIXTURE_H_

#include <memory>

#include "collectives/in_memory_store.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/nccl_communicator.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {

class FakeNcclFixture : public ::testing::Test {
 protected:
  // Rank 0 of a group of four, over this fixture's store, fake and signal; 30 s to init.
  NcclCommunicatorOptions Options() {
    NcclCommunicatorOptions o;
    o.rank = 0;
    o.size = 4;
    o.store = &store_;
    o.api = &api_;
    o.clock = Clock::Real();
    o.signal = signal_;
    o.init_deadline = Later();
    o.poll_interval = absl::Microseconds(50);
    return o;
  }
  static absl::Time Later() { return absl::Now() + absl::Seconds(30); }

  InMemoryStore store_;
  FakeNcclApi api_;
  std::shared_ptr<AbortSignal> signal_ = std::make_shared<AbortSignal>();
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_FIXTURE_H_

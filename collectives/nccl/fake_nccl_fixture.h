// FakeNcclFixture: the fixture of the NCCL communicator's host-side tests: an in-memory
// rendezvous store, a FakeNcclWorld, the FakeNcclApi of the single-rank tests (api_) and the
// attempt's AbortSignal, options over them, and groups of ranks in threads (CreateRanks).
// Thread model: as the test's; CreateRanks and OnRanks run one thread per rank and join them.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_FIXTURE_H_
#define LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/in_memory_store.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "collectives/nccl/nccl_communicator.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {

class FakeNcclFixture : public ::testing::Test {
 protected:
  // Rank `rank` of a group of `size` over this fixture's store, api_ and signal_; 30 s to
  // init. A group of more than one inits only once its other ranks join too.
  NcclCommunicatorOptions Options(int rank = 0, int size = 1) {
    NcclCommunicatorOptions o;
    o.rank = rank;
    o.size = size;
    o.store = &store_;
    o.api = &api_;
    o.clock = Clock::Real();
    o.signal = signal_;
    o.init_deadline = Later();
    o.poll_interval = poll_interval_;
    return o;
  }
  static absl::Time Later() { return absl::Now() + absl::Seconds(30); }

  // Runs fn(rank) for ranks 0..n-1, one thread each, and joins them.
  static void OnRanks(int n, const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
    for (std::thread& t : threads) t.join();
  }

  // Ranks 0..n-1 of one group (rendezvous key `key`), each with its own FakeNcclApi over
  // world_ (rank_apis_[r]) and AbortSignal (rank_signals_[r]), as n processes would have,
  // created concurrently as NCCL's init requires. Null entries where Create failed (the test
  // has then failed).
  std::vector<std::unique_ptr<NcclCommunicator>> CreateRanks(int n,
                                                             const std::string& key = "nccl_id") {
    rank_apis_.clear();
    rank_signals_.clear();
    for (int r = 0; r < n; ++r) {
      rank_apis_.push_back(std::make_unique<FakeNcclApi>(&world_));
      rank_signals_.push_back(std::make_shared<AbortSignal>());
    }
    std::vector<std::unique_ptr<NcclCommunicator>> comms(n);
    OnRanks(n, [&](int r) {
      NcclCommunicatorOptions o = Options(r, n);
      o.key = key;
      o.api = rank_apis_[r].get();
      o.signal = rank_signals_[r];
      absl::StatusOr<std::unique_ptr<NcclCommunicator>> c = NcclCommunicator::Create(o);
      EXPECT_TRUE(c.ok()) << "rank " << r << " of " << n << ": " << c.status();
      if (c.ok()) comms[r] = *std::move(c);
    });
    return comms;
  }

  // The longest sleep of a waiting call (NcclCommunicatorOptions::poll_interval).
  absl::Duration poll_interval_ = absl::Microseconds(50);
  FakeNcclWorld world_;
  InMemoryStore store_;
  FakeNcclApi api_{&world_};
  std::shared_ptr<AbortSignal> signal_ = std::make_shared<AbortSignal>();
  std::vector<std::unique_ptr<FakeNcclApi>> rank_apis_;
  std::vector<std::shared_ptr<AbortSignal>> rank_signals_;
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_FIXTURE_H_

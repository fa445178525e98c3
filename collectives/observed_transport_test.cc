#include "collectives/observed_transport.h"

#include <map>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "collectives/communicator.h"
#include "collectives/transport/inproc/inproc_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

// Records what it is told.
class RecordingObserver : public CollectiveObserver {
 public:
  void AllReduceDone(size_t bytes, absl::Duration time, int group_size) override {
    absl::MutexLock l(&mu_);
    all_reduces.push_back({bytes, group_size});
    EXPECT_GE(time, absl::ZeroDuration());
  }
  bool counts_bytes() const override { return true; }
  void Sent(int peer, size_t bytes) override {
    absl::MutexLock l(&mu_);
    sent[peer] += bytes;
  }
  void Received(int peer, size_t bytes) override {
    absl::MutexLock l(&mu_);
    received[peer] += bytes;
  }

  absl::Mutex mu_;
  std::vector<std::pair<size_t, int>> all_reduces;
  std::map<int, size_t> sent;
  std::map<int, size_t> received;
};

TEST(ObservedTransportTest, CountsBytesByPeerAndGradientAllReduces) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1000;
  auto hub = std::make_shared<InProcHub>(kRanks);
  std::vector<RecordingObserver> observers(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = Communicator::Create(std::make_unique<InProcTransport>(hub, r),
                                       AlgorithmOptions(), &observers[r]);
      ASSERT_TRUE(comm.ok()) << comm.status();
      std::vector<float> v(kCount, 1.0f);
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      ASSERT_TRUE(
          (*comm)
              ->AllReduceAsync(v.data(), v.data(), kCount, DType::kF32, ReduceOp::kSum, deadline)
              ->Wait()
              .ok());
      EXPECT_EQ(v[0], 2.0f);
      ASSERT_TRUE((*comm)->Barrier(deadline).ok());  // moves bytes, counts no all-reduce
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    const int peer = 1 - r;
    RecordingObserver& o = observers[r];
    ASSERT_EQ(o.all_reduces.size(), 1u);
    EXPECT_EQ(o.all_reduces[0].first, kCount * sizeof(float));
    EXPECT_EQ(o.all_reduces[0].second, kRanks);
    // Every rank both sends and receives at least its half of the vector.
    EXPECT_GE(o.sent[peer], kCount * sizeof(float) / 2) << "rank " << r;
    EXPECT_GE(o.received[peer], kCount * sizeof(float) / 2) << "rank " << r;
    EXPECT_EQ(o.sent.count(r), 0u);
    EXPECT_EQ(o.sent, o.received) << "what one rank sends the other receives";
  }
}

TEST(ObservedTransportTest, FailedCallCountsNothing) {
  auto hub = std::make_shared<InProcHub>(2);
  RecordingObserver o;
  ObservedTransport t(std::make_unique<InProcTransport>(hub, 0), &o);
  t.Abort();
  char byte = 0;
  SendSpec send;
  send.peer = 1;
  send.data = &byte;
  send.len = 1;
  RecvSpec recv;
  const absl::Status s = t.SendRecv(send, recv, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("rank 0 aborted"));
  EXPECT_TRUE(o.sent.empty());
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.size(), 2);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

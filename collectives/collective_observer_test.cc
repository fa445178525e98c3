// The Communicator's reports to a CollectiveObserver: every collective that runs, numbered
// in run order (the same numbers on every rank), sync and async alike, with its payload, and
// its end with the status; nothing for a call refused before it starts.
#include "collectives/collective_observer.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "collectives/communicator.h"
#include "collectives/test_util.h"
#include "collectives/transport/inproc/inproc_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

// An in-process group of `observers.size()` ranks, rank r observed by observers[r].
std::vector<std::unique_ptr<Communicator>> ObservedGroup(
    const std::vector<CollectiveObserver*>& observers) {
  const int n = static_cast<int>(observers.size());
  auto hub = std::make_shared<InProcHub>(n);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < n; ++r) {
    auto comm = Communicator::Create(std::make_unique<InProcTransport>(hub, r), {}, observers[r]);
    EXPECT_TRUE(comm.ok()) << comm.status();
    if (comm.ok()) group.push_back(std::move(*comm));
  }
  return group;
}

class Recording final : public CollectiveObserver {
 public:
  struct Event {
    bool enter;
    int64_t seq;
    std::string kind;
    size_t bytes;
    bool ok;
  };
  void OnEnter(const CollectiveCall& call) override {
    absl::MutexLock l(&mu_);
    events_.push_back({true, call.seq, call.kind, call.bytes, true});
  }
  void OnLeave(const CollectiveCall& call, const absl::Status& status) override {
    absl::MutexLock l(&mu_);
    events_.push_back({false, call.seq, call.kind, call.bytes, status.ok()});
  }
  std::vector<Event> events() {
    absl::MutexLock l(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

TEST(CollectiveObserverTest, EveryRankNumbersTheSameCollectivesAlike) {
  const int n = 3;
  std::vector<Recording> observers(n);
  auto group = ObservedGroup({&observers[0], &observers[1], &observers[2]});
  ASSERT_EQ(group.size(), static_cast<size_t>(n));
  RunRanks(n, [&](int r) {
    Communicator& c = *group[r];
    std::vector<float> a(100, 1.0f), b(7, 2.0f);
    Handle h = c.AllReduceAsync(a.data(), a.data(), a.size(), DType::kF32, ReduceOp::kSum, Soon());
    ASSERT_TRUE(
        c.AllReduce(b.data(), b.data(), b.size(), DType::kF32, ReduceOp::kSum, Soon()).ok());
    ASSERT_TRUE(h->Wait().ok());
    ASSERT_TRUE(c.Broadcast(b.data(), b.size(), DType::kF32, 0, Soon()).ok());
    ASSERT_TRUE(c.Barrier(Soon()).ok());
    // Refused before it starts: not reported, and no number taken.
    const absl::Status refused = c.Broadcast(b.data(), b.size(), DType::kF32, n, Soon());
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_THAT(std::string(refused.message()),
                ::testing::HasSubstr("root 3 is not a rank of a group of 3"));
  });
  for (int r = 0; r < n; ++r) {
    const std::vector<Recording::Event> events = observers[r].events();
    ASSERT_EQ(events.size(), 8u) << "rank " << r;
    const std::vector<std::pair<std::string, size_t>> want = {
        {"all-reduce", 400}, {"all-reduce", 28}, {"broadcast", 28}, {"barrier", 0}};
    for (int i = 0; i < 4; ++i) {
      const Recording::Event& enter = events[2 * i];
      const Recording::Event& leave = events[2 * i + 1];
      EXPECT_TRUE(enter.enter);
      EXPECT_FALSE(leave.enter);
      EXPECT_EQ(enter.seq, i + 1) << "rank " << r;
      EXPECT_EQ(leave.seq, i + 1);
      EXPECT_EQ(enter.kind, want[i].first);
      EXPECT_EQ(enter.bytes, want[i].second);
      EXPECT_TRUE(leave.ok);
    }
  }
}

TEST(CollectiveObserverTest, AListTellsEveryObserver) {
  Recording a, b;
  CollectiveObserverList both({&a, nullptr, &b});
  auto group = ObservedGroup({&both});
  ASSERT_EQ(group.size(), 1u);
  ASSERT_TRUE(group[0]->Barrier(Soon()).ok());
  for (Recording* r : {&a, &b}) {
    ASSERT_EQ(r->events().size(), 2u);
    EXPECT_EQ(r->events()[1].kind, "barrier");
  }
}

// What a metrics exporter hears: bytes by peer and the counted all-reduces.
class Counting final : public CollectiveObserver {
 public:
  void AllReduceDone(size_t bytes, absl::Duration, int group_size) override {
    absl::MutexLock l(&mu_);
    all_reduce_bytes_ += bytes;
    group_size_ = group_size;
  }
  bool counts_bytes() const override { return true; }
  void Sent(int, size_t bytes) override {
    absl::MutexLock l(&mu_);
    sent_ += bytes;
  }
  void Received(int, size_t bytes) override {
    absl::MutexLock l(&mu_);
    received_ += bytes;
  }
  size_t all_reduce_bytes() {
    absl::MutexLock l(&mu_);
    return all_reduce_bytes_;
  }
  int group_size() {
    absl::MutexLock l(&mu_);
    return group_size_;
  }
  size_t sent() {
    absl::MutexLock l(&mu_);
    return sent_;
  }
  size_t received() {
    absl::MutexLock l(&mu_);
    return received_;
  }

 private:
  absl::Mutex mu_;
  size_t all_reduce_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int group_size_ ABSL_GUARDED_BY(mu_) = 0;
  size_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  size_t received_ ABSL_GUARDED_BY(mu_) = 0;
};

// A flight recorder and the metrics on one communicator: each hears what it listens for.
TEST(CollectiveObserverTest, AListTellsARecorderAndTheMetricsOfOneCommunicator) {
  const int n = 2;
  std::vector<Recording> recorders(n);
  std::vector<Counting> metrics(n);
  CollectiveObserverList rank0({&recorders[0], &metrics[0]});
  CollectiveObserverList rank1({&recorders[1], &metrics[1]});
  auto group = ObservedGroup({&rank0, &rank1});
  ASSERT_EQ(group.size(), static_cast<size_t>(n));
  RunRanks(n, [&](int r) {
    std::vector<float> a(1000, 1.0f);
    ASSERT_TRUE(
        group[r]
            ->AllReduceAsync(a.data(), a.data(), a.size(), DType::kF32, ReduceOp::kSum, Soon())
            ->Wait()
            .ok());
  });
  for (int r = 0; r < n; ++r) {
    const std::vector<Recording::Event> events = recorders[r].events();
    ASSERT_EQ(events.size(), 2u) << "rank " << r;
    EXPECT_EQ(events[0].kind, "all-reduce");
    EXPECT_EQ(events[0].bytes, 4000u);
    EXPECT_EQ(metrics[r].all_reduce_bytes(), 4000u) << "rank " << r;
    EXPECT_EQ(metrics[r].group_size(), n);
    EXPECT_GT(metrics[r].sent(), 0u);
    EXPECT_GT(metrics[r].received(), 0u);
  }
}

TEST(CollectiveObserverTest, AFailedCollectiveLeavesWithItsError) {
  Recording observer;
  auto group = ObservedGroup({&observer, nullptr});
  ASSERT_EQ(group.size(), 2u);
  std::vector<float> a(4, 1.0f);
  // Rank 1 never joins: rank 0 waits in collective #1 until its deadline.
  absl::Status s = group[0]->AllReduce(a.data(), a.data(), a.size(), DType::kF32, ReduceOp::kSum,
                                       absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("deadline passed waiting for a message from rank 1"));
  const std::vector<Recording::Event> events = observer.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].enter);
  EXPECT_EQ(events[0].seq, 1);
  EXPECT_FALSE(events[1].ok);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

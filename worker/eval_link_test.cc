#include "worker/eval_link.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

// A handle on a store shared by both ends (each end of a real job has its own client of the
// coordinator's store): Abort() ends this handle's waits only.
class StoreHandle final : public collectives::Store {
 public:
  explicit StoreHandle(collectives::Store* shared) : shared_(shared) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return shared_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override {
    // In slices, so that Abort() is seen.
    while (true) {
      if (aborted_.load()) return absl::AbortedError("store handle aborted");
      const absl::Time slice = std::min(deadline, absl::Now() + absl::Milliseconds(20));
      absl::StatusOr<std::string> v = shared_->Get(key, slice);
      if (v.ok() || !absl::IsDeadlineExceeded(v.status()) || slice >= deadline) return v;
    }
  }
  void Abort() override { aborted_.store(true); }

 private:
  collectives::Store* const shared_;
  std::atomic<bool> aborted_{false};
};

v1::Partition Part(bool chief) {
  v1::Partition p;
  p.set_job_id("job-1");
  p.set_secret("0123456789abcdef");
  p.set_is_chief(chief);
  p.set_is_evaluator(!chief);
  return p;
}

EvalLinkOptions Options() {
  EvalLinkOptions o;
  o.transport = collectives::TransportKind::kTcp;
  o.connect_timeout = absl::Seconds(20);
  return o;
}

TEST(EvalLink, CheckpointsArriveInOrderThenTheEnd) {
  collectives::InMemoryStore shared;
  std::vector<std::string> sent = {std::string(1, 'a'), std::string(4097, 'b'), std::string()};
  for (int i = 0; i < 1000; ++i) sent[2].push_back(static_cast<char>(i));
  std::vector<std::string> got;
  absl::Status received;
  std::thread evaluator([&] {
    StoreHandle store(&shared);
    auto link = EvalLink::Connect(Part(false), &store, Options());
    ASSERT_TRUE(link.ok()) << link.status();
    while (true) {
      auto bytes = (*link)->Receive(absl::Now() + absl::Seconds(20));
      if (!bytes.ok()) {
        received = bytes.status();
        return;
      }
      if (!bytes->has_value()) return;
      got.push_back(**bytes);
    }
  });
  {
    CheckpointSender sender(Part(true), std::make_unique<StoreHandle>(&shared), Options(),
                            absl::Seconds(20));
    for (const std::string& s : sent) sender.Enqueue(s);
    const absl::Status finished = sender.Finish(absl::Now() + absl::Seconds(20));
    EXPECT_TRUE(finished.ok()) << finished;
  }
  evaluator.join();
  EXPECT_TRUE(received.ok()) << received;
  EXPECT_EQ(got, sent);
}

// Everything the evaluator receives until the end marker.
std::vector<std::string> ReceiveAll(collectives::Store* shared) {
  StoreHandle store(shared);
  auto link = EvalLink::Connect(Part(false), &store, Options());
  EXPECT_TRUE(link.ok()) << link.status();
  std::vector<std::string> got;
  if (!link.ok()) return got;
  while (true) {
    auto bytes = (*link)->Receive(absl::Now() + absl::Seconds(20));
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok() || !bytes->has_value()) return got;
    got.push_back(**bytes);
  }
}

// An evaluator that joins after the chief queued five checkpoints: within the byte budget
// all five reach it; past the budget the oldest are dropped, the newest `min_queued` kept.
TEST(EvalLink, ALateEvaluatorGetsEveryCheckpointTheBudgetHolds) {
  const std::vector<std::string> sent = {"ckpt-040", "ckpt-080", "ckpt-120", "ckpt-160",
                                         "ckpt-174"};
  for (const int64_t budget : {int64_t{256} << 20, int64_t{20}}) {
    SCOPED_TRACE(absl::StrCat("budget ", budget));
    collectives::InMemoryStore shared;
    std::vector<std::string> got;
    {
      // The sender's thread waits in Connect for the evaluator, so nothing is sent before it
      // joins: every Enqueue below lands in the queue.
      CheckpointSender sender(Part(true), std::make_unique<StoreHandle>(&shared), Options(),
                              absl::Seconds(20), /*min_queued=*/2, budget);
      for (const std::string& s : sent) sender.Enqueue(s);
      std::thread evaluator([&] { got = ReceiveAll(&shared); });
      const absl::Status finished = sender.Finish(absl::Now() + absl::Seconds(20));
      EXPECT_TRUE(finished.ok()) << finished;
      evaluator.join();
    }
    if (budget > 100) {
      EXPECT_EQ(got, sent);
    } else {
      EXPECT_EQ(got, std::vector<std::string>(sent.end() - 2, sent.end()));
    }
  }
}

TEST(EvalLink, OnlyTheChiefAndTheEvaluatorJoin) {
  collectives::InMemoryStore shared;
  v1::Partition worker = Part(true);
  worker.set_is_chief(false);
  worker.set_is_evaluator(false);
  EXPECT_EQ(EvalLink::Connect(worker, &shared, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// No evaluator ever joins: neither Finish nor the destructor waits for the connect timeout.
TEST(EvalLink, ASenderWithNoEvaluatorEndsAtItsDeadlineAndAbort) {
  collectives::InMemoryStore shared;
  const absl::Time start = absl::Now();
  {
    EvalLinkOptions o = Options();
    o.connect_timeout = absl::Seconds(60);
    CheckpointSender sender(Part(true), std::make_unique<StoreHandle>(&shared), o,
                            absl::Seconds(60));
    sender.Enqueue("checkpoint");
    EXPECT_EQ(sender.Finish(absl::Now() + absl::Milliseconds(300)).code(),
              absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// The evaluator waits for a checkpoint that does not come; the attempt is aborted: Receive
// returns at once. And when the chief goes away, the evaluator learns it (no hang).
TEST(EvalLink, AbortAndAChiefThatLeavesEndTheEvaluatorsWait) {
  collectives::InMemoryStore shared;
  std::unique_ptr<EvalLink> evaluator_link;
  std::thread connect([&] {
    StoreHandle store(&shared);
    auto link = EvalLink::Connect(Part(false), &store, Options());
    ASSERT_TRUE(link.ok()) << link.status();
    evaluator_link = std::move(*link);
  });
  auto sender = std::make_unique<CheckpointSender>(
      Part(true), std::make_unique<StoreHandle>(&shared), Options(), absl::Seconds(20));
  connect.join();
  ASSERT_NE(evaluator_link, nullptr);
  // The chief goes away without an end marker.
  sender.reset();
  const absl::Time start = absl::Now();
  auto bytes = evaluator_link->Receive(absl::Now() + absl::Seconds(60));
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kUnavailable) << bytes.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

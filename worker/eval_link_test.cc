#include "worker/eval_link.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/blob_broadcast.h"
#include "collectives/communicator_factory.h"
#include "collectives/in_memory_store.h"
#include "common/cluster_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::HasSubstr;

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
  ToProto(ClusterMap{{"worker", {"127.0.0.1:2000"}}, {"evaluator", {"127.0.0.1:2001"}}},
          p.mutable_cluster());
  ToProto(chief ? TaskRef{"worker", 0} : TaskRef{"evaluator", 0}, p.mutable_task());
  return p;
}

EvalLinkOptions Options() {
  EvalLinkOptions o;
  o.transport = collectives::TransportKind::kTcp;
  o.connect_timeout = absl::Seconds(20);
  o.max_checkpoint_bytes = 1 << 20;  // these partitions have no model to bound them by
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
  ToProto(TaskRef{"worker", 1}, worker.mutable_task());  // neither chief nor evaluator
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

// A dishonest chief: the evaluator's peer in the link's group (it holds the attempt's secret,
// as a compromised chief would) that broadcasts hand-made headers and bytes.
class RawChief {
 public:
  explicit RawChief(collectives::Store* store) {
    EXPECT_TRUE(store->Set("eval/ready/0", "ready").ok());
    collectives::CommunicatorConfig config;
    config.rank = 0;
    config.world_size = 2;
    config.transport = collectives::TransportKind::kTcp;
    config.secret = Part(true).secret();
    config.key_prefix = "eval";
    config.connect_timeout = absl::Seconds(20);
    auto comm = collectives::CreateCommunicator(config, store);
    EXPECT_TRUE(comm.ok()) << comm.status();
    if (comm.ok()) comm_ = std::move(*comm);
  }
  // Broadcasts `bytes` as whole words (the evaluator's side of each broadcast must match).
  void Send(std::string bytes) {
    ASSERT_NE(comm_, nullptr);
    bytes.resize((bytes.size() + 7) / 8 * 8, '\0');
    const absl::Status s = comm_->Broadcast(bytes.data(), bytes.size() / 8, DType::kI64, 0,
                                            absl::Now() + absl::Seconds(20));
    EXPECT_TRUE(s.ok()) << s;
  }

 private:
  std::unique_ptr<collectives::CollectiveCommunicator> comm_;
};

// What the evaluator's link gets on its first Receive while `chief` runs.
absl::Status EvaluatorReceives(const std::function<void(RawChief&)>& chief) {
  collectives::InMemoryStore shared;
  absl::Status received;
  std::thread evaluator([&] {
    StoreHandle store(&shared);
    auto link = EvalLink::Connect(Part(false), &store, Options());
    ASSERT_TRUE(link.ok()) << link.status();
    received = (*link)->Receive(absl::Now() + absl::Seconds(20)).status();
  });
  StoreHandle store(&shared);
  RawChief raw(&store);
  chief(raw);
  evaluator.join();
  return received;
}

// The bytes of the evaluator's first checkpoint as the link labels it.
collectives::BlobOptions FirstBlob() {
  collectives::BlobOptions o;
  o.secret = Part(true).secret();
  o.label = "the evaluator's checkpoint #1 of job job-1";
  o.max_bytes = Options().max_checkpoint_bytes;
  return o;
}

TEST(EvalLink, AChiefAnnouncingAHugeCheckpointIsRefusedBeforeAllocating) {
  const absl::Status received = EvaluatorReceives([](RawChief& chief) {
    std::string header = collectives::EncodeBlobHeader(FirstBlob(), 0, "x");
    const int64_t huge = int64_t{1} << 62;  // allocating it would abort the test
    std::memcpy(header.data() + 8, &huge, sizeof(huge));
    chief.Send(header);
  });
  EXPECT_EQ(received.code(), absl::StatusCode::kResourceExhausted) << received;
  EXPECT_THAT(std::string(received.message()), HasSubstr("rank 0 announced"));
  EXPECT_THAT(std::string(received.message()), HasSubstr("the job's checkpoint bound"));
}

TEST(EvalLink, ATamperedCheckpointIsRefusedNamingTheChief) {
  const absl::Status received = EvaluatorReceives([](RawChief& chief) {
    std::string checkpoint(3000, 'c');
    chief.Send(collectives::EncodeBlobHeader(FirstBlob(), 0, checkpoint));
    checkpoint[1234] = 'C';
    chief.Send(checkpoint);
  });
  EXPECT_EQ(received.code(), absl::StatusCode::kDataLoss) << received;
  EXPECT_THAT(std::string(received.message()), HasSubstr("from rank 0 failed authentication"));
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

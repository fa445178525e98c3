// MultiWorkerMirroredStrategy with 2 workers as threads of this process (TCP on loopback,
// in-memory rendezvous): auto-sharding policies, the chief's initial variables, reductions
// across workers, a lost peer, and tasks outside the training group.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "collectives/in_memory_store.h"
#include "distribute/devices.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/test_sources.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace lockstep::distribute {
namespace {

using engine::Shape;
using engine::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

TfConfig Worker(int index, int num_workers) {
  std::vector<std::string> addresses;
  for (int i = 0; i < num_workers; ++i) addresses.push_back(absl::StrCat("127.0.0.1:", 2000 + i));
  auto c = TfConfig::Create({{"worker", addresses}}, TaskRef{"worker", index});
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

class TwoWorkers : public ::testing::Test {
 protected:
  // Builds the two workers' strategies concurrently (Create waits for every worker).
  void Build(int devices_per_worker, absl::Duration timeout = absl::Seconds(20),
             size_t bytes_per_pack = 64,
             const std::function<void(MultiWorkerMirroredStrategyOptions&)>& tweak = {}) {
    std::vector<std::thread> threads;
    strategies_.resize(2);
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        MultiWorkerMirroredStrategyOptions options;
        options.available.num_cpu_devices = devices_per_worker;
        options.communication.timeout = timeout;
        options.communication.bytes_per_pack = bytes_per_pack;
        options.store = &store_;
        options.secret = "secret";
        options.connect_timeout = absl::Seconds(20);
        if (tweak) tweak(options);
        auto s = MultiWorkerMirroredStrategy::Create(Worker(w, 2), options);
        ASSERT_TRUE(s.ok()) << s.status();
        strategies_[w] = std::move(*s);
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
  }

  // fn(worker, strategy) on both workers at once.
  void OnEachWorker(const std::function<void(int, Strategy&)>& fn) {
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) threads.emplace_back([&, w] { fn(w, *strategies_[w]); });
    for (auto& t : threads) t.join();
  }

  std::vector<std::string> WriteFiles(int n) {
    std::vector<std::string> files;
    const char* dir = std::getenv("TEST_TMPDIR");
    for (int k = 0; k < n; ++k) {
      std::string path = absl::StrCat(
          dir == nullptr ? "/tmp" : dir, "/mw_shard_",
          ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_", k, ".txt");
      std::ofstream out(path);
      for (int i = 0; i < 4; ++i) out << k * 10 + i << "\n";
      files.push_back(path);
    }
    return files;
  }

  // Every element each worker's single replica received, and the files each opened.
  void Distribute(AutoShardPolicy policy, const std::vector<std::string>& files) {
    got.assign(2, {});
    opened.assign(2, {});
    OnEachWorker([&](int w, Strategy& s) {
      auto log = std::make_shared<OpenedFiles>();
      DistributeOptions options;
      options.auto_shard_policy = policy;
      auto dataset = s.ExperimentalDistributeDataset(LineFileSource(files, log), 4, options);
      ASSERT_TRUE(dataset.ok()) << dataset.status();
      got[w] = Drain(**dataset)[0];
      opened[w] = log->Get();
    });
  }

  // Filled by Distribute: per worker, the elements its replica got and the files it opened.
  std::vector<std::vector<int64_t>> got;
  std::vector<std::vector<std::string>> opened;
  collectives::InMemoryStore store_;
  std::vector<std::unique_ptr<MultiWorkerMirroredStrategy>> strategies_;
};

TEST_F(TwoWorkers, FileShardingGivesEachWorkerTwoOfFourFiles) {
  Build(1);
  std::vector<std::string> files = WriteFiles(4);
  Distribute(AutoShardPolicy::kFile, files);
  EXPECT_THAT(opened[0], ElementsAre(files[0], files[2]));
  EXPECT_THAT(opened[1], ElementsAre(files[1], files[3]));
  EXPECT_THAT(got[0], ElementsAre(0, 1, 2, 3, 20, 21, 22, 23));
  EXPECT_THAT(got[1], ElementsAre(10, 11, 12, 13, 30, 31, 32, 33));
}

TEST_F(TwoWorkers, DataShardingReadsEverythingAndKeepsEverySecondElement) {
  Build(1);
  std::vector<std::string> files = WriteFiles(4);
  Distribute(AutoShardPolicy::kData, files);
  EXPECT_EQ(opened[0], files);
  EXPECT_EQ(opened[1], files);
  EXPECT_THAT(got[0], ElementsAre(0, 2, 10, 12, 20, 22, 30, 32));
  EXPECT_THAT(got[1], ElementsAre(1, 3, 11, 13, 21, 23, 31, 33));
}

TEST_F(TwoWorkers, OffReadsEverything) {
  Build(1);
  std::vector<std::string> files = WriteFiles(2);
  Distribute(AutoShardPolicy::kOff, files);
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(opened[w], files);
    EXPECT_THAT(got[w], ElementsAre(0, 1, 2, 3, 10, 11, 12, 13));
  }
}

TEST_F(TwoWorkers, AutoWithFewerFilesThanWorkersFallsBackToDataAndLogsWhy) {
  Build(1);
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  std::vector<std::string> files = WriteFiles(1);
  Distribute(AutoShardPolicy::kAuto, files);
  spdlog::default_logger()->sinks().pop_back();
  EXPECT_THAT(got[0], ElementsAre(0, 2));
  EXPECT_THAT(got[1], ElementsAre(1, 3));
  EXPECT_THAT(log.str(),
              HasSubstr("AUTO sharding falls back to DATA: 1 input file(s) for 2 workers"));
  // With enough files AUTO shards by file.
  files = WriteFiles(2);
  Distribute(AutoShardPolicy::kAuto, files);
  EXPECT_THAT(opened[0], ElementsAre(files[0]));
  EXPECT_THAT(opened[1], ElementsAre(files[1]));
}

TEST_F(TwoWorkers, FileShardingWithTooFewFilesIsRefused) {
  Build(1);
  std::vector<std::string> files = WriteFiles(1);
  OnEachWorker([&](int, Strategy& s) {
    DistributeOptions options;
    options.auto_shard_policy = AutoShardPolicy::kFile;
    auto dataset = s.ExperimentalDistributeDataset(
        LineFileSource(files, std::make_shared<OpenedFiles>()), 4, options);
    EXPECT_EQ(dataset.status().code(), absl::StatusCode::kFailedPrecondition);
  });
}

TEST_F(TwoWorkers, VariablesStartFromTheChiefsValues) {
  Build(2);
  OnEachWorker([](int w, Strategy& s) {
    StrategyScope scope = s.Scope();
    auto v = scope.CreateVariable("w", Tensor::FromVector<float>({w + 1.0f, 7}, Shape{2}));
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(v->num_copies(), 2);
    for (const Tensor& c : v->copies()) EXPECT_THAT(c.ToVector<float>(), ElementsAre(1, 7));
  });
}

TEST_F(TwoWorkers, BroadcastFromChiefAfterARestore) {
  Build(2);
  OnEachWorker([](int w, Strategy& s) {
    StrategyScope scope = s.Scope();
    auto v = scope.CreateVariable("w", Tensor::FromVector<float>({0, 0}, Shape{2}));
    ASSERT_TRUE(v.ok()) << v.status();
    // Only the chief restored a checkpoint; the others have other values.
    ASSERT_EQ(v->num_copies(), 2);
    for (int c = 0; c < v->num_copies(); ++c) {
      v->copy(c).data<float>()[0] = w == 0 ? 5 : -1;
    }
    Tensor slot = Tensor::Scalar<int64_t>(w == 0 ? 42 : 0);
    ASSERT_TRUE(s.extended().BroadcastFromChief({&*v}).ok());
    ASSERT_TRUE(s.extended().BroadcastFromChief(std::vector<Tensor*>{&slot}).ok());
    for (const Tensor& c : v->copies()) EXPECT_THAT(c.ToVector<float>(), ElementsAre(5, 0));
    EXPECT_EQ(slot.data<int64_t>()[0], 42);
  });
}

collectives::BlobOptions Blob(int64_t max_bytes) {
  collectives::BlobOptions o;
  o.secret = "secret";
  o.label = "the checkpoint of step 3";
  o.max_bytes = max_bytes;
  o.bound_name = "the job's checkpoint bound";
  return o;
}

TEST_F(TwoWorkers, BroadcastBytesCarriesAnyWorkersBytesToEveryWorker) {
  Build(1);
  OnEachWorker([](int w, Strategy& s) {
    std::string bytes = w == 1 ? std::string(3001, 'k') : "stale";
    const absl::Status st = s.extended().BroadcastBytes(&bytes, 1, Blob(4096));
    ASSERT_TRUE(st.ok()) << "worker " << w << ": " << st;
    EXPECT_EQ(bytes, std::string(3001, 'k'));
  });
}

// A receiver whose bound the announced length passes refuses it before allocating, naming
// the sender; leaving the group, it makes the sender's next collective fail fast instead of
// waiting for it.
TEST_F(TwoWorkers, BroadcastBytesOverTheReceiversBoundIsRefusedAndTheSenderLearnsFast) {
  Build(1, absl::Seconds(30));
  std::vector<absl::Status> status(2);
  absl::Status next;
  const absl::Time start = absl::Now();
  OnEachWorker([&](int w, Strategy& s) {
    std::string bytes = w == 1 ? std::string(3001, 'k') : "";
    status[w] = s.extended().BroadcastBytes(&bytes, 1, Blob(w == 0 ? 1000 : 4096));
    if (!status[w].ok()) {
      s.Abort();  // what a failed restore does to its attempt
      return;
    }
    next =
        s.Reduce(ReduceOp::kSum, DistributedValues::PerReplica({Tensor::Scalar<float>(1)}), kNoAxis)
            .status();
  });
  EXPECT_EQ(status[0].code(), absl::StatusCode::kResourceExhausted) << status[0];
  EXPECT_THAT(std::string(status[0].message()),
              HasSubstr("rank 1 announced the checkpoint of step 3 of 3001 bytes, over the "
                        "job's checkpoint bound of 1000 bytes"));
  EXPECT_EQ(next.code(), absl::StatusCode::kUnavailable) << next;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << next;
}

TEST_F(TwoWorkers, ReplicaIdsAndReductionsSpanBothWorkers) {
  Build(2);
  OnEachWorker([](int w, Strategy& s) {
    EXPECT_EQ(s.num_replicas_in_sync(), 4);
    auto ids = s.Run([](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
      return Tensor::Scalar<float>(ctx.replica_id_in_sync_group());
    });
    ASSERT_TRUE(ids.ok()) << ids.status();
    // Only this worker's replicas are local.
    std::vector<Tensor> local = s.ExperimentalLocalResults(*ids);
    ASSERT_EQ(local.size(), 2u);
    EXPECT_EQ(local[0].data<float>()[0], 2 * w);
    EXPECT_EQ(local[1].data<float>()[0], 2 * w + 1);
    auto sum = s.Reduce(ReduceOp::kSum, *ids, kNoAxis);
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(sum->data<float>()[0], 0 + 1 + 2 + 3);
    auto all = s.Run([](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
      return ctx.AllReduce(ReduceOp::kMean, Tensor::Scalar<float>(ctx.replica_id_in_sync_group()));
    });
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->components().size(), 2u);
    for (const Tensor& t : all->components()) EXPECT_EQ(t.data<float>()[0], 1.5f);
    // A partial global batch across workers: MEAN over axis 0 divides by the true count.
    DistributedValues partial =
        w == 0 ? DistributedValues::PerReplica({Tensor::FromVector<float>({1, 2}, Shape{2}),
                                                Tensor::FromVector<float>({3, 4}, Shape{2})})
               : DistributedValues::PerReplica({Tensor::FromVector<float>({5}, Shape{1}),
                                                Tensor::FromVector<float>({}, Shape{0})});
    auto mean = s.Reduce(ReduceOp::kMean, partial, 0);
    ASSERT_TRUE(mean.ok()) << mean.status();
    EXPECT_FLOAT_EQ(mean->data<float>()[0], 3.0f);
  });
}

TEST_F(TwoWorkers, EncryptedWorkersReduceAsPlaintextOnes) {
  Build(2, absl::Seconds(20), 64,
        [](MultiWorkerMirroredStrategyOptions& o) { o.communication.encrypt = true; });
  OnEachWorker([](int, Strategy& s) {
    auto all = s.Run([](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
      return ctx.AllReduce(ReduceOp::kSum, Tensor::Scalar<float>(ctx.replica_id_in_sync_group()));
    });
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->components().size(), 2u);
    for (const Tensor& t : all->components()) EXPECT_EQ(t.data<float>()[0], 6.0f);
  });
}

TEST(MultiWorkerMirroredStrategyTest, ADataPortInUseFailsNamingWhoChoseIt) {
  const int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len);
  collectives::InMemoryStore store;
  MultiWorkerMirroredStrategyOptions options;
  options.store = &store;
  options.secret = "secret";
  options.data_port = ntohs(addr.sin_port);
  options.data_port_origin = "lockstepd --data_port";
  options.connect_timeout = absl::Seconds(5);
  auto s = MultiWorkerMirroredStrategy::Create(Worker(0, 2), options);
  close(taken);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("(lockstepd --data_port)"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("in use"));
}

TEST_F(TwoWorkers, FusedGradientReducerAcrossWorkers) {
  Build(2);
  OnEachWorker([](int, Strategy& s) {
    for (int step = 0; step < 3; ++step) {
      auto out = s.RunMulti(
          [](ReplicaContext& ctx,
             const std::vector<Tensor>&) -> absl::StatusOr<std::vector<Tensor>> {
            const float id = ctx.replica_id_in_sync_group();
            std::vector<Tensor> grads = {
                Tensor::FromVector<float>({id, 1, 2}, Shape{3}),
                Tensor::FromVector<double>({id * 2}, Shape{1}),
                Tensor::FromVector<float>(std::vector<float>(40, id), Shape{40})};
            auto reducer = ctx.MakeGradientReducer(ReduceOp::kMean);
            for (Tensor& g : grads) reducer->Add(&g);
            absl::Status st = reducer->Finish();
            if (!st.ok()) return st;
            return grads;
          },
          {});
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), 3u);
      for (const DistributedValues& grad : *out) ASSERT_EQ(grad.components().size(), 2u);
      for (const Tensor& t : (*out)[0].components()) {
        EXPECT_THAT(t.ToVector<float>(), ElementsAre(1.5, 1, 2));
      }
      for (const Tensor& t : (*out)[1].components()) EXPECT_EQ(t.data<double>()[0], 3.0);
      for (const Tensor& t : (*out)[2].components()) EXPECT_EQ(t.data<float>()[39], 1.5f);
    }
  });
}

TEST_F(TwoWorkers, LostPeerFailsTheReductionInsteadOfHanging) {
  Build(1, absl::Seconds(10));
  strategies_[1]->Abort();
  strategies_[1].reset();  // the peer is gone
  const absl::Time start = absl::Now();
  auto sum = strategies_[0]->Reduce(
      ReduceOp::kSum, DistributedValues::PerReplica({Tensor::Scalar<float>(1)}), kNoAxis);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kUnavailable) << sum.status();
  EXPECT_THAT(std::string(sum.status().message()), HasSubstr("peer rank 1"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << sum.status();
  // The strategy is failed from then on.
  auto again = strategies_[0]->Reduce(
      ReduceOp::kSum, DistributedValues::PerReplica({Tensor::Scalar<float>(1)}), kNoAxis);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable) << again.status();
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("peer rank 1"));
}

TEST(MultiWorkerMirroredStrategyTest, TrainingRankAndRefusedTasks) {
  auto chief =
      TfConfig::Create({{"chief", {"h:1"}}, {"worker", {"h:2", "h:3"}}}, TaskRef{"worker", 1});
  ASSERT_TRUE(chief.ok());
  EXPECT_EQ(*TrainingRank(*chief), 2);
  auto evaluator =
      TfConfig::Create({{"worker", {"h:2"}}, {"evaluator", {"h:9"}}}, TaskRef{"evaluator", 0});
  ASSERT_TRUE(evaluator.ok());
  MultiWorkerMirroredStrategyOptions options;
  auto s = MultiWorkerMirroredStrategy::Create(*evaluator, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("evaluator/0"));
  options.communication.implementation = CommunicationOptions::Implementation::kNccl;
  EXPECT_EQ(MultiWorkerMirroredStrategy::Create(Worker(0, 1), options).status().code(),
            BuiltWithCuda() ? absl::StatusCode::kInvalidArgument  // CPU replicas
                            : absl::StatusCode::kUnimplemented);
  // Two workers but no rendezvous store.
  options.communication.implementation = CommunicationOptions::Implementation::kAuto;
  EXPECT_EQ(MultiWorkerMirroredStrategy::Create(Worker(0, 2), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MultiWorkerMirroredStrategyTest, OneWorkerNeedsNoStore) {
  MultiWorkerMirroredStrategyOptions options;
  options.available.num_cpu_devices = 2;
  auto s = MultiWorkerMirroredStrategy::Create(Worker(0, 1), options);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->num_replicas_in_sync(), 2);
  EXPECT_EQ((*s)->cluster_resolver()->task_type(), "worker");
}

}  // namespace
}  // namespace lockstep::distribute

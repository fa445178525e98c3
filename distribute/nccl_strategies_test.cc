// Mirrored and MultiWorkerMirrored over NCCL, on the multi-rank fake NCCL (collectives/nccl/
// fake_nccl_world.h: ranks really reduce; host memory stands for device memory, and the
// replicas' tensors are host tensors placed on /gpu:N), with 2 and 4 ranks: the default
// cross-device ops on GPU replicas are NcclAllReduce and give what the CPU collectives give;
// a peer loss reported by the coordinator ends the survivors' pending all-reduce at once,
// naming the lost rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/in_memory_store.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/nccl_all_reduce.h"

namespace lockstep::distribute {
namespace {

using collectives::nccl::FakeNcclApi;
using collectives::nccl::FakeNcclWorld;
using engine::Shape;
using engine::Tensor;
using ::testing::HasSubstr;

Tensor F32(std::vector<float> v) {
  const int64_t n = v.size();
  return Tensor::FromVector<float>(v, Shape{n});
}

// Replica r's values: not symmetric in r, so a misplaced rank shows.
std::vector<float> ValuesOf(int r) { return {1.0f + r, 0.5f * r * r, -3.0f, 100.0f * r}; }

// Each replica all-reduces its values with SUM and with MEAN, and a batch of gradients of
// several sizes through its GradientReducer (fused packs); returns, per local replica, the
// SUM, the MEAN and the gradients end to end.
std::vector<std::vector<float>> Step(Strategy& strategy) {
  const int n = strategy.num_local_replicas();
  std::vector<std::vector<float>> out(n);
  auto result =
      strategy.Run([&](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
        const int r = ctx.replica_id_in_sync_group();
        auto sum = ctx.AllReduce(ReduceOp::kSum, F32(ValuesOf(r)));
        if (!sum.ok()) return sum.status();
        auto mean = ctx.AllReduce(ReduceOp::kMean, F32(ValuesOf(r)));
        if (!mean.ok()) return mean.status();
        std::vector<Tensor> grads = {F32({1.0f * r}), F32(std::vector<float>(40, 0.25f * r)),
                                     F32({2.0f, 3.0f * r})};
        auto reducer = strategy.extended().cross_device_ops().MakeGradientReducer(
            ctx.local_replica_id(), ReduceOp::kSum, absl::Now() + absl::Seconds(20));
        for (Tensor& g : grads) reducer->Add(&g);
        if (absl::Status s = reducer->Finish(); !s.ok()) return s;
        std::vector<float>& o = out[ctx.local_replica_id()];
        for (const Tensor* t : {&*sum, &*mean, &grads[0], &grads[1], &grads[2]}) {
          o.insert(o.end(), t->data<float>(), t->data<float>() + t->num_elements());
        }
        return Tensor::Scalar<float>(0);
      });
  EXPECT_TRUE(result.ok()) << result.status();
  return out;
}

TEST(NcclMirroredTest, DefaultsToNcclOnGpusAndMatchesTheCpuCollectives) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(n, " GPUs"));
    FakeNcclWorld world;
    FakeNcclApi api(&world);
    MirroredStrategyOptions gpu;
    gpu.available.num_gpus = n;
    gpu.communication.timeout = absl::Seconds(20);
    gpu.communication.bytes_per_pack = 64;
    gpu.nccl.api = &api;
    auto nccl = MirroredStrategy::Create(gpu);
    ASSERT_TRUE(nccl.ok()) << nccl.status();
    EXPECT_EQ((*nccl)->extended().cross_device_ops().kind(), CrossDeviceOpsKind::kNcclAllReduce);
    EXPECT_EQ((*nccl)->extended().worker_devices()[n - 1].name(), absl::StrCat("/gpu:", n - 1));

    MirroredStrategyOptions cpu;
    cpu.available.num_cpu_devices = n;
    cpu.communication = gpu.communication;
    cpu.cross_device_ops = CrossDeviceOpsKind::kCollective;
    auto reference = MirroredStrategy::Create(cpu);
    ASSERT_TRUE(reference.ok()) << reference.status();

    const std::vector<std::vector<float>> got = Step(**nccl);
    const std::vector<std::vector<float>> want = Step(**reference);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    ASSERT_EQ(want.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(got[r].size(), 4u + 4u + 1u + 40u + 2u) << r;
      EXPECT_EQ(got[r], want[r]) << "replica " << r;
    }
    EXPECT_EQ(got[0][0], n * (n + 1) / 2.0f);  // sum of 1 + r
    // Every local GPU's communicator was bound to its device, and gradients went in packs.
    std::vector<std::string> calls = api.calls();
    for (int d = 0; d < n; ++d) {
      EXPECT_NE(std::find(calls.begin(), calls.end(), absl::StrCat("device ", d)), calls.end());
    }
    EXPECT_NE(std::find(calls.begin(), calls.end(), "group-start"), calls.end());
  }
}

TEST(NcclMirroredTest, ExplicitCrossDeviceOpsStayAvailableOnGpus) {
  FakeNcclWorld world;
  FakeNcclApi api(&world);
  MirroredStrategyOptions o;
  o.available.num_gpus = 2;
  o.nccl.api = &api;
  o.cross_device_ops = CrossDeviceOpsKind::kReduceToOneDevice;
  auto s = MirroredStrategy::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->extended().cross_device_ops().kind(), CrossDeviceOpsKind::kReduceToOneDevice);
  // NcclAllReduce on CPU replicas is refused, naming what the replicas use.
  MirroredStrategyOptions c;
  c.available.num_cpu_devices = 2;
  c.nccl.api = &api;
  c.cross_device_ops = CrossDeviceOpsKind::kNcclAllReduce;
  auto refused = MirroredStrategy::Create(c);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("NcclAllReduce needs GPU replicas"));
}

TfConfig Worker(int index, int num_workers) {
  std::vector<std::string> addresses;
  for (int i = 0; i < num_workers; ++i) addresses.push_back(absl::StrCat("127.0.0.1:", 2000 + i));
  auto c = TfConfig::Create({{"worker", addresses}}, TaskRef{"worker", index});
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Two workers (threads, each with its own FakeNcclApi over one world, as two processes
// would have), `gpus` GPUs each (0: CPU devices, the Lockstep collectives).
class TwoNcclWorkers : public ::testing::Test {
 protected:
  void Build(int gpus, int cpus, absl::Duration timeout = absl::Seconds(20)) {
    strategies_.clear();
    strategies_.resize(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      apis_[w] = std::make_unique<FakeNcclApi>(&world_);
      threads.emplace_back([&, w] {
        MultiWorkerMirroredStrategyOptions o;
        o.available.num_gpus = gpus;
        o.available.num_cpu_devices = cpus;
        o.communication.timeout = timeout;
        o.communication.bytes_per_pack = 64;
        o.store = &store_;
        o.key_prefix = absl::StrCat("job", builds_);
        o.secret = "secret";
        o.connect_timeout = absl::Seconds(20);
        o.nccl.api = apis_[w].get();
        auto s = MultiWorkerMirroredStrategy::Create(Worker(w, 2), o);
        ASSERT_TRUE(s.ok()) << s.status();
        strategies_[w] = std::move(*s);
      });
    }
    for (auto& t : threads) t.join();
    ++builds_;
  }

  std::vector<std::vector<std::vector<float>>> StepBoth() {
    std::vector<std::vector<std::vector<float>>> out(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) threads.emplace_back([&, w] { out[w] = Step(*strategies_[w]); });
    for (auto& t : threads) t.join();
    return out;
  }

  FakeNcclWorld world_;
  collectives::InMemoryStore store_;
  std::unique_ptr<FakeNcclApi> apis_[2];
  std::vector<std::unique_ptr<Strategy>> strategies_;
  int builds_ = 0;
};

TEST_F(TwoNcclWorkers, MultiWorkerMirroredOverNcclMatchesTheCpuCollectives) {
  for (int per_worker : {1, 2}) {  // 2 and 4 NCCL ranks
    SCOPED_TRACE(absl::StrCat(2 * per_worker, " ranks"));
    Build(/*gpus=*/0, /*cpus=*/per_worker);
    ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
    const auto want = StepBoth();
    strategies_.clear();

    Build(/*gpus=*/per_worker, /*cpus=*/1);
    ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
    EXPECT_EQ(strategies_[0]->extended().cross_device_ops().kind(),
              CrossDeviceOpsKind::kNcclAllReduce);
    const auto got = StepBoth();
    for (int w = 0; w < 2; ++w) {
      ASSERT_EQ(got[w].size(), static_cast<size_t>(per_worker));
      ASSERT_EQ(want[w].size(), static_cast<size_t>(per_worker));
      for (int r = 0; r < per_worker; ++r) {
        ASSERT_EQ(got[w][r].size(), 51u);
        EXPECT_EQ(got[w][r], want[w][r]) << "worker " << w << " replica " << r;
      }
    }
    strategies_.clear();
  }
}

// Worker 1 is lost (it never enters the step); the coordinator's notice reaches worker 0's
// strategy, whose pending NCCL all-reduces end within 2 s naming rank 1, although the
// collective's own deadline is a minute away.
TEST_F(TwoNcclWorkers, PeerLossEndsTheSurvivorsPendingAllReduceNamingTheLostRank) {
  for (int per_worker : {1, 2}) {
    SCOPED_TRACE(absl::StrCat(2 * per_worker, " ranks"));
    Build(/*gpus=*/per_worker, /*cpus=*/1, absl::Minutes(1));
    ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
    FakeNcclApi& api = *apis_[0];
    const size_t before = api.calls().size();
    std::thread notice([&] {
      // Both local replicas have issued their all-reduce.
      if (api.WaitForCalls(before + per_worker, absl::Now() + absl::Seconds(20))) {
        strategies_[0]->PeerLost(1, "worker/1 (rank 1): lockstepd stopped heartbeating");
      }
    });
    const absl::Time start = absl::Now();
    auto result = strategies_[0]->Run(
        [](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
          return ctx.AllReduce(ReduceOp::kSum, F32({1.0f}));
        });
    notice.join();
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr("rank 1 was lost (worker/1 (rank 1)"))
        << result.status();
    strategies_.clear();
  }
}

}  // namespace
}  // namespace lockstep::distribute

// The strategies on GPU replicas, on CPU machines: fake GPUs (fake_gpu_devices.h: FakeCudaApi,
// the grid emulator's kernels, FakeBlasApi) and the multi-rank fake NCCL reading their device
// memory (FakeNcclWorld::UseDeviceMemory). The digits MLP trains through Trainer and the
// strategies' datasets, and must end with the CPU strategy's weights:
//   - OneDevice on /gpu:0 against OneDevice on /cpu:0,
//   - Mirrored over 2 fake GPUs, over NcclAllReduce (gradients all-reduced in device memory)
//     and over ReductionToOneDevice (staged through host memory), against Mirrored over 2 CPU
//     devices.
// Bit for bit: the fake's GEMM is the CPU's and the emulated kernels run the CPU kernels'
// arithmetic (engine/device_generic_test_body.h), the fake NCCL adds rank 0's buffer then
// rank 1's as the CPU's replica-order reduction does, and so the same float operations
// happen in the same order. (On a real GPU the same comparison holds within 1e-4 relative:
// gpu_strategy_cuda_test.) A control shows the comparison can fail (another learning rate).
// (CentralStorage and gradient accumulation on GPU replicas: gpu_central_accumulation_test.)
// Also: a checkpoint taken from GPU replicas restores bit for bit and continues as an
// uninterrupted run; a device out of memory is RESOURCE_EXHAUSTED naming the device; a GPU
// replica without a GPU device is FAILED_PRECONDITION naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/in_memory_store.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/fake_gpu_fixture.h"
#include "distribute/gpu_strategy_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/one_device_strategy.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {
namespace {

using collectives::nccl::FakeNcclApi;
using collectives::nccl::FakeNcclWorld;
using ::testing::HasSubstr;

using GpuStrategyTest = TwoFakeGpusTest;

TEST_F(GpuStrategyTest, OneDeviceOnGpuTrainsTheCpuWeightsBitForBit) {
  auto cpu = OneDeviceStrategy::Create("/cpu:0");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto gpu = OneDeviceStrategy::Create("/gpu:0", Gpus());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const TrainedRun want = TrainDigits(**cpu, kDigitsSteps);
  const TrainedRun got = TrainDigits(**gpu, kDigitsSteps);
  ASSERT_FALSE(want.weights.empty());
  EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
  EXPECT_EQ(got.losses, want.losses);
  // The loss fell: it trained, on both.
  EXPECT_LT(want.losses.back(), want.losses.front());
  // The variables lived in device memory, and their updates ran there.
  EXPECT_GT(gpus_.devices->Find(0)->context->allocator_stats().peak_bytes_in_use, 0u);

  // Control: another learning rate gives other weights, which the comparison sees.
  const TrainedRun other = TrainDigits(**cpu, kDigitsSteps, /*learning_rate=*/0.11);
  EXPECT_FALSE(SameWeights(other.weights, want.weights, /*rel=*/1e-4));
}

TEST_F(GpuStrategyTest, MirroredOverTwoGpusMatchesTwoCpuDevices) {
  MirroredStrategyOptions cpu_options;
  cpu_options.available.num_cpu_devices = 2;
  auto cpu = MirroredStrategy::Create(cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const TrainedRun want = TrainDigits(**cpu, kDigitsSteps);
  ASSERT_FALSE(want.weights.empty());

  for (CrossDeviceOpsKind kind :
       {CrossDeviceOpsKind::kNcclAllReduce, CrossDeviceOpsKind::kReduceToOneDevice}) {
    SCOPED_TRACE(CrossDeviceOpsKindName(kind));
    MirroredStrategyOptions o;
    o.available = Gpus();
    o.nccl.api = &nccl_;
    o.cross_device_ops = kind;
    o.communication.timeout = absl::Seconds(20);
    auto gpu = MirroredStrategy::Create(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_EQ((*gpu)->extended().worker_devices()[1].name(), "/gpu:1");
    const TrainedRun got = TrainDigits(**gpu, kDigitsSteps);
    EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
    EXPECT_EQ(got.losses, want.losses);
  }
  // The NCCL run all-reduced device buffers: its collectives reached the fake NCCL.
  std::vector<std::string> calls = nccl_.calls();
  EXPECT_NE(std::find_if(calls.begin(), calls.end(),
                         [](const std::string& c) { return c.rfind("all-reduce f32", 0) == 0; }),
            calls.end());
}

TEST_F(GpuStrategyTest, CheckpointFromGpuReplicasRestoresAndContinues) {
  MirroredStrategyOptions o;
  o.available = Gpus();
  o.nccl.api = &nccl_;
  o.communication.timeout = absl::Seconds(20);
  auto strategy = MirroredStrategy::Create(o);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  engine::Graph graph = DigitsGraph();
  TrainerOptions options = DigitsTrainerOptions(0.1, /*momentum=*/true);
  auto trainer = Trainer::Create(strategy->get(), &graph, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE(TrainSteps(**strategy, **trainer, 0, 3).ok());
  absl::StatusOr<v1::Checkpoint> checkpoint = MakeCheckpoint(**trainer);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_GT(checkpoint->optimizer_slots_size(), 0);  // momentum slots, from device memory

  // A fresh trainer (new device copies, new slots) restored from it holds the same values...
  auto restored = Trainer::Create(strategy->get(), &graph, options);
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE((*restored)->Restore(*checkpoint).ok());
  absl::StatusOr<v1::Checkpoint> again = MakeCheckpoint(**restored);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->variables_size(), checkpoint->variables_size());
  ASSERT_EQ(again->optimizer_slots_size(), checkpoint->optimizer_slots_size());
  for (int i = 0; i < checkpoint->variables_size(); ++i) {
    EXPECT_EQ(again->variables(i).SerializeAsString(), checkpoint->variables(i).SerializeAsString())
        << checkpoint->variables(i).name();
  }
  for (int i = 0; i < checkpoint->optimizer_slots_size(); ++i) {
    EXPECT_EQ(again->optimizer_slots(i).SerializeAsString(),
              checkpoint->optimizer_slots(i).SerializeAsString())
        << checkpoint->optimizer_slots(i).name();
  }
  EXPECT_EQ(again->global_step(), checkpoint->global_step());
  // ...on every replica's copy,
  for (const DistributedVariable& v : (*restored)->variables()) {
    ASSERT_EQ(v.num_copies(), 2);
    EXPECT_EQ(v.Read(1).device().name(), "/gpu:1");
  }
  // ...and continues exactly as the uninterrupted run.
  ASSERT_TRUE(TrainSteps(**strategy, **trainer, 3, 2).ok());
  ASSERT_TRUE(TrainSteps(**strategy, **restored, 3, 2).ok());
  auto a = (*trainer)->HostVariables();
  auto b = (*restored)->HostVariables();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(SameWeights(*b, *a, /*rel=*/0));
  // Replica 1's copy is replica 0's.
  for (const DistributedVariable& v : (*restored)->variables()) {
    auto c0 = ToHost(v.Read(0), gpus_.devices->Find(0));
    auto c1 = ToHost(v.Read(1), gpus_.devices->Find(1));
    ASSERT_TRUE(c0.ok() && c1.ok());
    EXPECT_TRUE(c0->BitwiseEquals(*c1)) << v.name();
  }
}

TEST_F(GpuStrategyTest, DeviceOutOfMemoryIsResourceExhaustedNamingTheDevice) {
  auto gpu = OneDeviceStrategy::Create("/gpu:1", Gpus());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  engine::Graph graph = DigitsGraph();
  // Creating the trainer places the variables on the device: its first allocation fails.
  gpus_.api->FailAllocation(1);
  auto trainer = Trainer::Create(gpu->get(), &graph, DigitsTrainerOptions(0.1));
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kResourceExhausted) << trainer.status();
  EXPECT_THAT(trainer.status().message(), HasSubstr("gpu:1")) << trainer.status();

  // In a step: a device of 1 MiB holds the model, not a step of 8192 examples (2 MiB of
  // features alone); the step fails cleanly, naming the replica's device.
  absl::StatusOr<FakeGpus> small = MakeFakeGpus(1, size_t{1} << 20);
  ASSERT_TRUE(small.ok()) << small.status();
  LocalDevices one;
  one.num_gpus = 1;
  one.gpus = small->devices;
  auto strategy = OneDeviceStrategy::Create("/gpu:0", one);
  ASSERT_TRUE(strategy.ok()) << strategy.status();
  TrainerOptions big = DigitsTrainerOptions(0.1);
  big.global_batch_size = 8192;
  auto big_trainer = Trainer::Create(strategy->get(), &graph, big);
  ASSERT_TRUE(big_trainer.ok()) << big_trainer.status();
  absl::Status step = TrainSteps(**strategy, **big_trainer, 0, 1, nullptr, 8192);
  EXPECT_EQ(step.code(), absl::StatusCode::kResourceExhausted) << step;
  EXPECT_THAT(step.message(), HasSubstr("/gpu:0")) << step;
  EXPECT_THAT(step.message(), HasSubstr("out of memory")) << step;
}

TEST_F(GpuStrategyTest, GpuReplicaWithoutAGpuDeviceIsRefusedNamingIt) {
  LocalDevices no_handles;
  no_handles.num_gpus = 1;
  auto gpu = OneDeviceStrategy::Create("/gpu:0", no_handles);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  engine::Graph graph = DigitsGraph();
  auto trainer = Trainer::Create(gpu->get(), &graph, DigitsTrainerOptions(0.1));
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kFailedPrecondition) << trainer.status();
  EXPECT_THAT(trainer.status().message(), HasSubstr("/gpu:0"));
}

TEST_F(GpuStrategyTest, ExplicitCopiesRefuseWhatTheyCannotDo) {
  const engine::Device gpu0(engine::Device::Type::kCuda, 0);
  const engine::Device gpu1(engine::Device::Type::kCuda, 1);
  const engine::Tensor host = engine::Tensor::FromVector<float>({1, 2, 3}, engine::Shape{3});
  // Feeds of a GPU replica stay host tensors.
  EXPECT_EQ(HostCopy(host, gpu1).device(), engine::Device::Cpu(0));
  // A GPU copy needs that GPU's handles.
  absl::StatusOr<engine::Tensor> none = CopyToDevice(host, gpu0, nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("/gpu:0"));
  absl::StatusOr<engine::Tensor> other = CopyToDevice(host, gpu0, gpus_.devices->Find(1));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  // Round trip, and host arithmetic on a device tensor is an error, not a crash.
  absl::StatusOr<engine::Tensor> on1 = CopyToDevice(host, gpu1, gpus_.devices->Find(1));
  ASSERT_TRUE(on1.ok()) << on1.status();
  EXPECT_EQ(on1->device(), gpu1);
  absl::StatusOr<engine::Tensor> back = ToHost(*on1, gpus_.devices->Find(1));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->BitwiseEquals(host));
  engine::Tensor acc = host.Clone();
  absl::Status add = AddInto(*on1, &acc);
  EXPECT_EQ(add.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(add.message(), HasSubstr("/gpu:1"));
  // CopyInto writes a device tensor in place, and refuses another shape.
  const engine::Tensor twice = engine::Tensor::FromVector<float>({2, 4, 6}, engine::Shape{3});
  ASSERT_TRUE(CopyInto(twice, &*on1, gpus_.devices->Find(1)).ok());
  EXPECT_TRUE(ToHost(*on1, gpus_.devices->Find(1))->BitwiseEquals(twice));
  const engine::Tensor wrong = engine::Tensor::FromVector<float>({1, 2}, engine::Shape{2});
  EXPECT_EQ(CopyInto(wrong, &*on1, gpus_.devices->Find(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

// Two workers (threads, as two processes would be) of MultiWorkerMirrored, one GPU each, each
// worker's GPU on its own FakeCudaApi (two hosts), NCCL between them on the multi-rank fake.
class TwoGpuWorkers : public ::testing::Test {
 protected:
  // Builds both workers' strategies: `gpus` (else one CPU device each, TCP collectives).
  void Build(bool gpus) {
    strategies_.clear();
    strategies_.resize(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        MultiWorkerMirroredStrategyOptions o;
        if (gpus) {
          o.available.num_gpus = 1;
          o.available.gpus = gpus_[w].devices;
        }
        o.communication.timeout = absl::Seconds(20);
        o.store = &store_;
        o.key_prefix = absl::StrCat("job", builds_);
        o.secret = "secret";
        o.connect_timeout = absl::Seconds(20);
        o.nccl.api = apis_[w].get();
        std::vector<std::string> addresses = {"127.0.0.1:2000", "127.0.0.1:2001"};
        auto cluster = TfConfig::Create({{"worker", addresses}}, TaskRef{"worker", w});
        ASSERT_TRUE(cluster.ok()) << cluster.status();
        auto s = MultiWorkerMirroredStrategy::Create(*cluster, o);
        ASSERT_TRUE(s.ok()) << s.status();
        strategies_[w] = std::move(*s);
      });
    }
    for (auto& t : threads) t.join();
    ++builds_;
  }

  void SetUp() override {
    for (int w = 0; w < 2; ++w) {
      absl::StatusOr<FakeGpus> g = MakeFakeGpus(1);
      ASSERT_TRUE(g.ok()) << g.status();
      gpus_[w] = *std::move(g);
      world_.UseDeviceMemory(gpus_[w].api.get());
      apis_[w] = std::make_unique<FakeNcclApi>(&world_);
    }
  }

  // Both workers train `steps` steps (worker w: rows [32w, 32w + 32) of each global batch of
  // 64); worker 0's weights on the host.
  std::vector<engine::Tensor> TrainBoth(int steps) {
    std::vector<engine::Tensor> out;
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        Strategy& s = *strategies_[w];
        engine::Graph graph = DigitsGraph();
        auto trainer = Trainer::Create(&s, &graph, DigitsTrainerOptions(0.1, /*momentum=*/true));
        ASSERT_TRUE(trainer.ok()) << trainer.status();
        const engine::Device device = s.extended().worker_devices()[0];
        for (int step = 0; step < steps; ++step) {
          std::vector<DistributedValues> inputs;
          for (const engine::Tensor& t : DigitsBatch(kDigitsGlobalBatch, step)) {
            auto part = SliceAxis0(t, 32 * w, 32 * w + 32);
            ASSERT_TRUE(part.ok());
            inputs.push_back(DistributedValues::PerReplica({HostCopy(*part, device)}));
          }
          auto r = (*trainer)->Step(inputs);
          ASSERT_TRUE(r.ok()) << r.status();
        }
        if (w == 0) {
          auto v = (*trainer)->HostVariables();
          ASSERT_TRUE(v.ok()) << v.status();
          out = *std::move(v);
        }
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  FakeGpus gpus_[2];
  FakeNcclWorld world_;
  std::unique_ptr<FakeNcclApi> apis_[2];
  collectives::InMemoryStore store_;
  std::vector<std::unique_ptr<Strategy>> strategies_;
  int builds_ = 0;
};

TEST_F(TwoGpuWorkers, MultiWorkerMirroredOverNcclOnDeviceMemoryMatchesTheCpuWorkers) {
  Build(/*gpus=*/false);
  ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
  const std::vector<engine::Tensor> want = TrainBoth(10);
  Build(/*gpus=*/true);
  ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
  EXPECT_EQ(strategies_[0]->extended().cross_device_ops().kind(),
            CrossDeviceOpsKind::kNcclAllReduce);
  const std::vector<engine::Tensor> got = TrainBoth(10);
  // Two ranks: a + b is b + a, so the NCCL sum is the TCP collectives' bit for bit.
  EXPECT_TRUE(SameWeights(got, want, /*rel=*/0));
  strategies_.clear();
}

TEST_F(TwoGpuWorkers, BroadcastFromChiefMakesEveryWorkersDeviceCopiesTheChiefs) {
  Build(/*gpus=*/true);
  ASSERT_TRUE(strategies_[0] != nullptr && strategies_[1] != nullptr);
  std::vector<engine::Tensor> seen(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      Strategy& s = *strategies_[w];
      StrategyScope scope = s.Scope();
      auto v = scope.CreateVariable(
          "v", engine::Tensor::FromVector<float>({1.f + w, 2.f, 3.f}, engine::Shape{3}));
      ASSERT_TRUE(v.ok()) << v.status();
      const engine::gpu::GpuDevice* gpu = gpus_[w].devices->Find(0);
      ASSERT_EQ(v->Read(0).device().name(), "/gpu:0");
      // Every worker starts from the chief's value (worker 0's 1, 2, 3)...
      EXPECT_TRUE(ToHost(v->Read(0), gpu)
                      ->BitwiseEquals(
                          engine::Tensor::FromVector<float>({1.f, 2.f, 3.f}, engine::Shape{3})));
      // ...then each writes its own, and the broadcast makes them the chief's again.
      ASSERT_TRUE(
          CopyInto(engine::Tensor::FromVector<float>({10.f * (w + 1), 0.f, -1.f}, engine::Shape{3}),
                   &v->copy(0), gpu)
              .ok());
      ASSERT_TRUE(s.extended().BroadcastFromChief(std::vector<DistributedVariable*>{&*v}).ok());
      auto host = ToHost(v->Read(0), gpu);
      ASSERT_TRUE(host.ok()) << host.status();
      seen[w] = *host;
    });
  }
  for (auto& t : threads) t.join();
  const engine::Tensor chiefs =
      engine::Tensor::FromVector<float>({10.f, 0.f, -1.f}, engine::Shape{3});
  EXPECT_TRUE(seen[0].BitwiseEquals(chiefs));
  EXPECT_TRUE(seen[1].BitwiseEquals(chiefs));
  strategies_.clear();
}

}  // namespace
}  // namespace lockstep::distribute

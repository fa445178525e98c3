// CentralStorage and gradient accumulation on GPU replicas, on CPU machines: fake GPUs
// (fake_gpu_devices.h) and the multi-rank fake NCCL over their device memory. The digits MLP
// trains through Trainer and must end with the same job's weights on CPU devices, bit for bit
// (the fake runs the CPU's arithmetic in the same order; see gpu_strategy_test.cc):
//   - CentralStorage over 2 fake GPUs (variables and the optimizer on the host, each replica
//     reading them through one host->device copy per variable and step into buffers reused
//     across steps, gradients back through one device->host copy each) against CentralStorage
//     over 2 CPU devices; the fake's copy counters show exactly those copies and the caching
//     allocator no device allocation after the first step;
//   - gradient accumulation, K = 2 and 3, on OneDevice /gpu:0, Mirrored over 2 fake GPUs (NCCL,
//     overlapped; and ReductionToOneDevice) and CentralStorage over 2 fake GPUs, the first K-1
//     micro-batches summed in device memory by the Add kernel, against the CPU strategies.
// Controls show the comparisons can fail (another learning rate; another K).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "distribute/central_storage_strategy.h"
#include "distribute/fake_gpu_devices.h"
#include "distribute/fake_gpu_fixture.h"
#include "distribute/gpu_strategy_test_util.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/one_device_strategy.h"
#include "distribute/tensor_math.h"

namespace lockstep::distribute {
namespace {

using ::testing::HasSubstr;

class GpuCentralAccumulationTest : public TwoFakeGpusTest {
 protected:
  std::unique_ptr<Strategy> CentralOnGpus() {
    CentralStorageStrategyOptions o;
    o.available = Gpus();
    auto s = CentralStorageStrategy::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::unique_ptr<Strategy>(std::move(*s)) : nullptr;
  }
  static std::unique_ptr<Strategy> CentralOnCpus() {
    CentralStorageStrategyOptions o;
    o.available.num_cpu_devices = 2;
    auto s = CentralStorageStrategy::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::unique_ptr<Strategy>(std::move(*s)) : nullptr;
  }
  std::unique_ptr<Strategy> MirroredOnGpus(CrossDeviceOpsKind kind) {
    MirroredStrategyOptions o;
    o.available = Gpus();
    o.nccl.api = &nccl_;
    o.cross_device_ops = kind;
    o.communication.timeout = absl::Seconds(20);
    auto s = MirroredStrategy::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::unique_ptr<Strategy>(std::move(*s)) : nullptr;
  }
  static std::unique_ptr<Strategy> MirroredOnCpus() {
    MirroredStrategyOptions o;
    o.available.num_cpu_devices = 2;
    auto s = MirroredStrategy::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::unique_ptr<Strategy>(std::move(*s)) : nullptr;
  }
};

TEST_F(GpuCentralAccumulationTest, CentralStorageOverTwoGpusMatchesTwoCpuDevicesBitForBit) {
  std::unique_ptr<Strategy> cpu = CentralOnCpus();
  std::unique_ptr<Strategy> gpu = CentralOnGpus();
  ASSERT_TRUE(cpu != nullptr && gpu != nullptr);
  ASSERT_EQ(gpu->extended().worker_devices()[1].name(), "/gpu:1");
  for (bool momentum : {false, true}) {
    SCOPED_TRACE(momentum ? "momentum" : "sgd");
    const TrainedRun want = TrainDigits(*cpu, kDigitsSteps, 0.1, kDigitsGlobalBatch, 1, momentum);
    const TrainedRun got = TrainDigits(*gpu, kDigitsSteps, 0.1, kDigitsGlobalBatch, 1, momentum);
    ASSERT_FALSE(want.weights.empty());
    EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
    EXPECT_EQ(got.losses, want.losses);
    EXPECT_LT(want.losses.back(), want.losses.front());
  }
  // Control: another learning rate gives other weights, which the comparison sees.
  const TrainedRun want = TrainDigits(*cpu, kDigitsSteps);
  const TrainedRun other = TrainDigits(*gpu, kDigitsSteps, /*learning_rate=*/0.11);
  EXPECT_FALSE(SameWeights(other.weights, want.weights, /*rel=*/1e-4));
}

TEST_F(GpuCentralAccumulationTest, CentralVariablesStayOnTheHostAndReachReplicasByExplicitCopies) {
  std::unique_ptr<Strategy> central = CentralOnGpus();
  std::unique_ptr<Strategy> nccl = MirroredOnGpus(CrossDeviceOpsKind::kNcclAllReduce);
  ASSERT_TRUE(central != nullptr && nccl != nullptr);
  engine::Graph graph = DigitsGraph();
  auto trainer = Trainer::Create(central.get(), &graph, DigitsTrainerOptions(0.1));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto mirrored = Trainer::Create(nccl.get(), &graph, DigitsTrainerOptions(0.1));
  ASSERT_TRUE(mirrored.ok()) << mirrored.status();
  // One host copy of each variable, updated by a host optimizer.
  int64_t variable_bytes = 0;
  for (const DistributedVariable& v : (*trainer)->variables()) {
    EXPECT_EQ(v.kind(), DistributedVariable::Kind::kCentral);
    ASSERT_EQ(v.num_copies(), 1);
    EXPECT_TRUE(v.Read(0).on_host()) << v.name();
    variable_bytes += v.Read(0).num_bytes();
  }
  const int64_t num_variables = static_cast<int64_t>((*trainer)->variables().size());
  ASSERT_GT(num_variables, 0);
  // What one step copies between host and devices, in either direction, on both fake GPUs.
  auto step_copies = [&](Strategy& s, Trainer& t, int step) {
    const auto before = gpus_.api->counters();
    EXPECT_TRUE(TrainSteps(s, t, step, 1).ok());
    const auto after = gpus_.api->counters();
    return std::pair<int64_t, uint64_t>(
        after.pageable_copies + after.pinned_copies - before.pageable_copies - before.pinned_copies,
        after.pageable_copy_bytes + after.pinned_copy_bytes - before.pageable_copy_bytes -
            before.pinned_copy_bytes);
  };
  ASSERT_TRUE(TrainSteps(*nccl, **mirrored, 0, 2).ok());
  const auto mirrored_step = step_copies(*nccl, **mirrored, 2);
  ASSERT_TRUE(TrainSteps(*central, **trainer, 0, 2).ok());  // buffers and caches warm
  const std::vector<const void*> buffers = [&] {
    std::vector<const void*> out;
    for (const DistributedVariable& v : (*trainer)->variables()) {
      for (int r = 0; r < 2; ++r) {
        const engine::Tensor* b = v.replica_buffer(r);
        EXPECT_TRUE(b != nullptr && b->valid() && b->device().name() == absl::StrCat("/gpu:", r));
        out.push_back(b != nullptr && b->valid() ? b->raw_device_data() : nullptr);
      }
    }
    return out;
  }();
  const int64_t device_allocations_0 =
      gpus_.devices->Find(0)->context->allocator_stats().device_allocations;
  const int64_t device_allocations_1 =
      gpus_.devices->Find(1)->context->allocator_stats().device_allocations;
  const auto central_step = step_copies(*central, **trainer, 2);
  // Mirrored over NCCL copies only the feeds and the loss; CentralStorage also each variable to
  // each replica and each gradient back: 2 replicas x 2 directions, nothing else.
  EXPECT_EQ(central_step.first - mirrored_step.first, 2 * 2 * num_variables);
  EXPECT_EQ(central_step.second - mirrored_step.second, uint64_t{2 * 2} * variable_bytes);
  // The replicas' buffers are the same device memory every step, and after the first step the
  // caching allocator asked the device for nothing more.
  ASSERT_TRUE(TrainSteps(*central, **trainer, 3, 3).ok());
  size_t i = 0;
  for (const DistributedVariable& v : (*trainer)->variables()) {
    for (int r = 0; r < 2; ++r) EXPECT_EQ(v.replica_buffer(r)->raw_device_data(), buffers[i++]);
  }
  EXPECT_EQ(gpus_.devices->Find(0)->context->allocator_stats().device_allocations,
            device_allocations_0);
  EXPECT_EQ(gpus_.devices->Find(1)->context->allocator_stats().device_allocations,
            device_allocations_1);
  // A restore writes the host value, which the replicas read: it continues bit for bit.
  absl::StatusOr<v1::Checkpoint> checkpoint = MakeCheckpoint(**trainer);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto fresh = Trainer::Create(central.get(), &graph, DigitsTrainerOptions(0.1));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE((*fresh)->Restore(*checkpoint).ok());
  ASSERT_TRUE(TrainSteps(*central, **trainer, 6, 2).ok());
  ASSERT_TRUE(TrainSteps(*central, **fresh, 6, 2).ok());
  auto a = (*trainer)->HostVariables();
  auto b = (*fresh)->HostVariables();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(SameWeights(*b, *a, /*rel=*/0));
}

TEST_F(GpuCentralAccumulationTest, CentralStorageOnAGpuWithoutDeviceHandlesIsRefusedNamingIt) {
  absl::StatusOr<FakeGpus> one = MakeFakeGpus(1);  // handles for /gpu:0 only
  ASSERT_TRUE(one.ok()) << one.status();
  CentralStorageStrategyOptions o;
  o.available.num_gpus = 2;
  o.available.gpus = one->devices;
  auto s = CentralStorageStrategy::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  engine::Graph graph = DigitsGraph();
  auto trainer = Trainer::Create(s->get(), &graph, DigitsTrainerOptions(0.1));
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kFailedPrecondition) << trainer.status();
  EXPECT_THAT(trainer.status().message(), HasSubstr("/gpu:1"));
}

TEST_F(GpuCentralAccumulationTest, AccumulationOnOneGpuMatchesTheCpuBitForBit) {
  auto cpu = OneDeviceStrategy::Create("/cpu:0");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto gpu = OneDeviceStrategy::Create("/gpu:0", Gpus());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<std::vector<engine::Tensor>> by_k;
  for (int k : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("K = ", k));
    const TrainedRun want = TrainDigits(**cpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, k);
    const TrainedRun got = TrainDigits(**gpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, k);
    ASSERT_FALSE(want.weights.empty());
    EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
    EXPECT_EQ(got.losses, want.losses);
    EXPECT_LT(want.losses.back(), want.losses.front());
    by_k.push_back(want.weights);
  }
  // Control: K = 2 and K = 3 train to other weights, which the comparison sees.
  EXPECT_FALSE(SameWeights(by_k[0], by_k[1], /*rel=*/1e-4));
}

TEST_F(GpuCentralAccumulationTest, AccumulationOnMirroredAndCentralGpusMatchesTheCpus) {
  std::unique_ptr<Strategy> mirrored_cpu = MirroredOnCpus();
  std::unique_ptr<Strategy> central_cpu = CentralOnCpus();
  ASSERT_TRUE(mirrored_cpu != nullptr && central_cpu != nullptr);
  for (int k : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("K = ", k));
    const TrainedRun want =
        TrainDigits(*mirrored_cpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, k);
    ASSERT_FALSE(want.weights.empty());
    for (CrossDeviceOpsKind kind :
         {CrossDeviceOpsKind::kNcclAllReduce, CrossDeviceOpsKind::kReduceToOneDevice}) {
      SCOPED_TRACE(CrossDeviceOpsKindName(kind));
      std::unique_ptr<Strategy> gpu = MirroredOnGpus(kind);
      ASSERT_TRUE(gpu != nullptr);
      const TrainedRun got = TrainDigits(*gpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, k);
      EXPECT_TRUE(SameWeights(got.weights, want.weights, /*rel=*/0));
      EXPECT_EQ(got.losses, want.losses);
    }
    const TrainedRun central_want =
        TrainDigits(*central_cpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, k);
    std::unique_ptr<Strategy> central_gpu = CentralOnGpus();
    ASSERT_TRUE(central_gpu != nullptr);
    const TrainedRun central_got =
        TrainDigits(*central_gpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, k);
    EXPECT_TRUE(SameWeights(central_got.weights, central_want.weights, /*rel=*/0));
    EXPECT_EQ(central_got.losses, central_want.losses);
  }
  // The overlapped NCCL path all-reduced device buffers.
  std::vector<std::string> calls = nccl_.calls();
  EXPECT_NE(std::find_if(calls.begin(), calls.end(),
                         [](const std::string& c) { return c.rfind("all-reduce f32", 0) == 0; }),
            calls.end());
  // Control: without accumulation (K = 1) the same micro-batches give other weights.
  const TrainedRun k1 = TrainDigits(*mirrored_cpu, kDigitsSteps / 2);
  const TrainedRun k2 = TrainDigits(*mirrored_cpu, kDigitsSteps / 2, 0.1, kDigitsGlobalBatch, 2);
  EXPECT_FALSE(SameWeights(k1.weights, k2.weights, /*rel=*/1e-4));
}

TEST_F(GpuCentralAccumulationTest, DeviceAddIntoAndCloneWhereTheyLie) {
  const engine::Device gpu1(engine::Device::Type::kCuda, 1);
  const engine::gpu::GpuDevice* dev = gpus_.devices->Find(1);
  const engine::Tensor x =
      engine::Tensor::FromVector<float>({0.1f, -2.5f, 1e-8f}, engine::Shape{3});
  const engine::Tensor y = engine::Tensor::FromVector<float>({0.2f, 2.5f, 3.f}, engine::Shape{3});
  engine::Tensor host_sum = y.Clone();
  ASSERT_TRUE(AddInto(x, &host_sum, nullptr).ok());  // host tensors: the host's AddInto
  auto dx = CopyToDevice(x, gpu1, dev);
  auto dy = CopyToDevice(y, gpu1, dev);
  ASSERT_TRUE(dx.ok() && dy.ok());
  auto clone = CloneWhereItLies(*dy, dev);
  ASSERT_TRUE(clone.ok()) << clone.status();
  EXPECT_NE(clone->raw_device_data(), dy->raw_device_data());
  ASSERT_TRUE(AddInto(*dx, &*clone, dev).ok());
  auto back = ToHost(*clone, dev);  // synchronises: the enqueued copy and add have run
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->BitwiseEquals(host_sum));
  EXPECT_TRUE(ToHost(*dy, dev)->BitwiseEquals(y));  // the clone was a copy
  // Refusals: a host tensor into a device one, another dtype, no handles.
  engine::Tensor host_acc = y.Clone();
  EXPECT_EQ(AddInto(*dx, &host_acc, dev).code(), absl::StatusCode::kInvalidArgument);
  auto ints =
      CopyToDevice(engine::Tensor::FromVector<int32_t>({1, 2, 3}, engine::Shape{3}), gpu1, dev);
  ASSERT_TRUE(ints.ok()) << ints.status();
  absl::Status wrong_dtype = AddInto(*ints, &*ints, dev);
  EXPECT_EQ(wrong_dtype.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_dtype.message(), HasSubstr("f32"));
  absl::Status no_handles = AddInto(*dx, &*clone, nullptr);
  EXPECT_EQ(no_handles.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_handles.message(), HasSubstr("/gpu:1"));
}

}  // namespace
}  // namespace lockstep::distribute

// The worked examples of the tf.distribute reference pages (shared/reference), run on
// OneDevice, Mirrored (both kinds of cross-device ops) and CentralStorage over logical CPU
// devices, plus the misuse the issue lists.
#include "distribute/strategy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "distribute/central_storage_strategy.h"
#include "distribute/devices.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/one_device_strategy.h"
#include "distribute/test_sources.h"

namespace lockstep::distribute {
namespace {

using engine::Shape;
using engine::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Strategy> Mirrored(int n, CrossDeviceOpsKind kind) {
  MirroredStrategyOptions options;
  options.available.num_cpu_devices = n;
  options.cross_device_ops = kind;
  options.communication.timeout = absl::Seconds(10);
  auto s = MirroredStrategy::Create(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

Tensor F32(std::vector<float> v) {
  const int64_t n = v.size();
  return Tensor::FromVector<float>(v, Shape{n});
}

class TwoReplicaTest : public ::testing::TestWithParam<int> {
 protected:
  // 0: Mirrored (reduce to one device), 1: Mirrored (collective), 2: CentralStorage.
  std::unique_ptr<Strategy> Make() {
    if (GetParam() == 2) {
      CentralStorageStrategyOptions options;
      options.available.num_cpu_devices = 2;
      auto s = CentralStorageStrategy::Create(options);
      EXPECT_TRUE(s.ok()) << s.status();
      return std::move(*s);
    }
    return Mirrored(2, GetParam() == 0 ? CrossDeviceOpsKind::kReduceToOneDevice
                                       : CrossDeviceOpsKind::kCollective);
  }
};

// "values for examples [0, 1, 2, 3] will be on replica 0 and [4, 5, 6, 7] on replica 1.
// With axis=None, reduce will aggregate only across replicas, returning [0+4, 1+5, 2+6,
// 3+7] ... axis=0 ... a scalar 0+1+2+3+4+5+6+7."
TEST_P(TwoReplicaTest, ReduceAxisNoneAndAxisZero) {
  auto strategy = Make();
  DistributedValues v = DistributedValues::PerReplica({F32({0, 1, 2, 3}), F32({4, 5, 6, 7})});
  auto none = strategy->Reduce(ReduceOp::kSum, v, kNoAxis);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(none->ToVector<float>(), ElementsAre(4, 6, 8, 10));
  auto axis0 = strategy->Reduce(ReduceOp::kSum, v, 0);
  ASSERT_TRUE(axis0.ok()) << axis0.status();
  EXPECT_EQ(axis0->shape(), Shape{});
  EXPECT_EQ(axis0->ToVector<float>()[0], 28);
  auto mean = strategy->Reduce(ReduceOp::kMean, v, kNoAxis);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_THAT(mean->ToVector<float>(), ElementsAre(2, 3, 4, 5));
}

// "if the last batch has size 6 and it is divided into [0, 1, 2, 3] and [4, 5] ...
// using axis=0 will use the correct denominator of 6."
TEST_P(TwoReplicaTest, PartialLastBatchIsSplitAndMeanUsesTrueCount) {
  auto strategy = Make();
  Tensor data = F32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});  // 8 + a partial 6
  auto dataset = strategy->ExperimentalDistributeDataset(TensorSliceSource({data}), 8);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_TRUE(*(*dataset)->Next());  // the full first batch
  auto step = (*dataset)->Next();
  ASSERT_TRUE(step.ok() && step->has_value());
  const DistributedValues& x = (**step)[0];
  EXPECT_THAT(x.component(0).ToVector<float>(), ElementsAre(8, 9, 10, 11));
  EXPECT_THAT(x.component(1).ToVector<float>(), ElementsAre(12, 13));
  auto mean = strategy->Reduce(ReduceOp::kMean, x, 0);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_FLOAT_EQ(mean->ToVector<float>()[0], (8 + 9 + 10 + 11 + 12 + 13) / 6.0f);
  // Without an axis the shapes do not match: a clear error, not a crash.
  auto none = strategy->Reduce(ReduceOp::kMean, x, kNoAxis);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("axis 0"));
  EXPECT_FALSE((*dataset)->Next()->has_value());
}

// run(replica_fn, args=(tf.constant(3.0),)) with input*2.0 -> 6.0 on every replica.
TEST_P(TwoReplicaTest, RunOnConstantInput) {
  auto strategy = Make();
  auto result = strategy->Run(
      [](ReplicaContext&, const std::vector<Tensor>& args) -> absl::StatusOr<Tensor> {
        return Tensor::Scalar<float>(args[0].data<float>()[0] * 2.0f);
      },
      {Tensor::Scalar<float>(3.0f)});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->kind(), DistributedValues::Kind::kPerReplica);
  std::vector<Tensor> local = strategy->ExperimentalLocalResults(*result);
  ASSERT_EQ(local.size(), 2u);
  for (const Tensor& t : local) EXPECT_EQ(t.data<float>()[0], 6.0f);
  EXPECT_THAT(result->DebugString(), HasSubstr("PerReplica:{0: f32[] [6], 1: f32[] [6]}"));
}

// all_reduce("sum") of the replica ids over 2 replicas gives 1 on each; reduce("SUM") of
// the ids as well.
TEST_P(TwoReplicaTest, AllReduceOfReplicaIds) {
  auto strategy = Make();
  auto ids =
      strategy->DistributeValuesFromFunction([](const ValueContext& ctx) -> absl::StatusOr<Tensor> {
        return Tensor::Scalar<int32_t>(ctx.replica_id_in_sync_group);
      });
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto result = strategy->Run(
      [](ReplicaContext& ctx, const std::vector<Tensor>& args) -> absl::StatusOr<Tensor> {
        return ctx.AllReduce(ReduceOp::kSum, args[0]);
      },
      {*ids});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<Tensor> local = strategy->ExperimentalLocalResults(*result);
  ASSERT_EQ(local.size(), 2u);
  for (const Tensor& t : local) EXPECT_EQ(t.data<int32_t>()[0], 1);
  auto step_fn = [](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
    return Tensor::Scalar<int32_t>(ctx.replica_id_in_sync_group());
  };
  auto per_replica = strategy->Run(step_fn);
  ASSERT_TRUE(per_replica.ok());
  auto total = strategy->Reduce(ReduceOp::kSum, *per_replica, kNoAxis);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(total->data<int32_t>()[0], 1);
}

// range(4).batch(2) over 2 replicas yields [0],[1] then [2],[3]; input*2 gives [0],[2]
// then [4],[6].
TEST_P(TwoReplicaTest, DistributedRangeDataset) {
  auto strategy = Make();
  auto dataset = strategy->ExperimentalDistributeDataset(TensorSliceSource({Range(4)}), 2);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  std::vector<std::vector<int64_t>> doubled;
  while (true) {
    auto step = (*dataset)->Next();
    ASSERT_TRUE(step.ok()) << step.status();
    if (!step->has_value()) break;
    auto result = strategy->Run(
        [](ReplicaContext& ctx, const std::vector<Tensor>& args) -> absl::StatusOr<Tensor> {
          EXPECT_EQ(args[0].device(), engine::Device::Cpu(ctx.local_replica_id()));
          Tensor out = args[0].Clone();
          for (int64_t i = 0; i < out.num_elements(); ++i) out.data<int64_t>()[i] *= 2;
          return out;
        },
        {(**step)[0]});
    ASSERT_TRUE(result.ok()) << result.status();
    std::vector<int64_t> row;
    ASSERT_EQ(result->components().size(), 2u);
    for (const Tensor& t : result->components()) {
      ASSERT_EQ(t.shape(), Shape{1});
      row.push_back(t.data<int64_t>()[0]);
    }
    doubled.push_back(row);
  }
  EXPECT_EQ(doubled, (std::vector<std::vector<int64_t>>{{0, 2}, {4, 6}}));
}

// experimental_distribute_values_from_function with replica ids, and with
// num_replicas_in_sync (then run(input*2) gives 4 on each replica).
TEST_P(TwoReplicaTest, DistributeValuesFromFunction) {
  auto strategy = Make();
  auto ids =
      strategy->DistributeValuesFromFunction([](const ValueContext& ctx) -> absl::StatusOr<Tensor> {
        static const float kArray[] = {3, 2, 1};
        return Tensor::Scalar<float>(kArray[ctx.replica_id_in_sync_group]);
      });
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->component(0).data<float>()[0], 3);
  EXPECT_EQ(ids->component(1).data<float>()[0], 2);
  auto n =
      strategy->DistributeValuesFromFunction([](const ValueContext& ctx) -> absl::StatusOr<Tensor> {
        return Tensor::Scalar<int32_t>(ctx.num_replicas_in_sync);
      });
  ASSERT_TRUE(n.ok());
  auto result = strategy->Run(
      [](ReplicaContext&, const std::vector<Tensor>& args) -> absl::StatusOr<Tensor> {
        return Tensor::Scalar<int32_t>(args[0].data<int32_t>()[0] * 2);
      },
      {*n});
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->components().size(), 2u);
  for (const Tensor& t : result->components()) EXPECT_EQ(t.data<int32_t>()[0], 4);
}

TEST_P(TwoReplicaTest, VariablesInsideAndOutsideScope) {
  auto strategy = Make();
  DistributedVariable plain = DistributedVariable::Plain("v", Tensor::Scalar<float>(1));
  EXPECT_EQ(plain.kind(), DistributedVariable::Kind::kPlain);
  EXPECT_FALSE(strategy->in_scope());
  StrategyScope scope = strategy->Scope();
  EXPECT_TRUE(strategy->in_scope());
  auto x = scope.CreateVariable("x", Tensor::Scalar<float>(1));
  ASSERT_TRUE(x.ok()) << x.status();
  if (GetParam() == 2) {
    EXPECT_EQ(x->kind(), DistributedVariable::Kind::kCentral);
    EXPECT_EQ(x->num_copies(), 1);
    EXPECT_EQ(x->Read(1).data<float>()[0], 1);
  } else {
    EXPECT_EQ(x->kind(), DistributedVariable::Kind::kMirrored);
    EXPECT_EQ(x->DebugString(), "MirroredVariable 'x':{0: f32[] [1], 1: f32[] [1]}");
    EXPECT_EQ(x->copy(1).device(), engine::Device::Cpu(1));
  }
}

TEST_P(TwoReplicaTest, RunWithMismatchedPerReplicaArgs) {
  auto strategy = Make();
  DistributedValues three = DistributedValues::PerReplica({F32({1}), F32({2}), F32({3})});
  auto result = strategy->Run(
      [](ReplicaContext&, const std::vector<Tensor>& a) -> absl::StatusOr<Tensor> { return a[0]; },
      {three});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("3 components"));
}

TEST_P(TwoReplicaTest, GlobalBatchNotDivisible) {
  auto strategy = Make();
  auto dataset = strategy->ExperimentalDistributeDataset(TensorSliceSource({Range(8)}), 3);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dataset.status().message(), HasSubstr("not divisible"));
}

TEST_P(TwoReplicaTest, NonDistributedValue) {
  auto strategy = Make();
  auto sum = strategy->Reduce(ReduceOp::kSum, F32({1, 2}), kNoAxis);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument);
  auto mean = strategy->Reduce(ReduceOp::kMean, F32({1, 2}), kNoAxis);
  ASSERT_TRUE(mean.ok());
  EXPECT_THAT(mean->ToVector<float>(), ElementsAre(1, 2));
  auto scalar_axis = strategy->Reduce(ReduceOp::kMean, Tensor::Scalar<float>(1), 0);
  EXPECT_EQ(scalar_axis.status().code(), absl::StatusCode::kInvalidArgument);
  auto axis1 = strategy->Reduce(ReduceOp::kMean, F32({1, 2}), 1);
  EXPECT_EQ(axis1.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(TwoReplicaTest, FailingReplicaDoesNotHangTheOthers) {
  auto strategy = Make();
  auto result =
      strategy->Run([](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
        if (ctx.replica_id_in_sync_group() == 1) return absl::InternalError("replica broke");
        return ctx.AllReduce(ReduceOp::kSum, Tensor::Scalar<float>(1));
      });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("replica broke"));
}

TEST_P(TwoReplicaTest, ReplicasRunOnLongLivedThreadsAndRunDoesNotNest) {
  auto strategy = Make();
  std::vector<std::thread::id> first(2), second(2);
  auto record = [&](std::vector<std::thread::id>* ids) {
    return [ids](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
      (*ids)[ctx.local_replica_id()] = std::this_thread::get_id();
      return Tensor::Scalar<float>(0);
    };
  };
  ASSERT_TRUE(strategy->Run(record(&first)).ok());
  ASSERT_TRUE(strategy->Run(record(&second)).ok());
  EXPECT_EQ(first, second);
  EXPECT_NE(first[0], first[1]);
  Strategy* s = strategy.get();
  auto nested =
      strategy->Run([s](ReplicaContext&, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
        auto inner =
            s->Run([](ReplicaContext&, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
              return Tensor::Scalar<float>(0);
            });
        if (!inner.ok()) return inner.status();
        return Tensor::Scalar<float>(1);
      });
  EXPECT_EQ(nested.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(TwoReplicaTest, DistributeDatasetsFromFunction) {
  auto strategy = Make();
  auto dataset = strategy->DistributeDatasetsFromFunction(
      [](const InputContext& ctx) -> absl::StatusOr<std::unique_ptr<BatchIterator>> {
        EXPECT_EQ(ctx.num_input_pipelines(), 1);
        EXPECT_EQ(ctx.input_pipeline_id(), 0);
        EXPECT_EQ(ctx.num_replicas_in_sync(), 2);
        EXPECT_EQ(*ctx.GetPerReplicaBatchSize(8), 4);
        absl::StatusOr<int64_t> odd = ctx.GetPerReplicaBatchSize(7);
        EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument) << odd.status();
        EXPECT_THAT(odd.status().message(),
                    HasSubstr("global batch size (7) is not divisible by the number of "
                              "replicas in sync (2)"));
        ShardSpec spec;
        return TensorSliceSource({Range(10)}).make(spec, *ctx.GetPerReplicaBatchSize(4));
      });
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  std::vector<std::vector<int64_t>> got = Drain(**dataset);
  // Each replica dequeues one per-replica batch per step: [0,1] [2,3] | [4,5] [6,7] | [8,9] [].
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{0, 1, 4, 5, 8, 9}, {2, 3, 6, 7}}));
}

INSTANTIATE_TEST_SUITE_P(Strategies, TwoReplicaTest, ::testing::Values(0, 1, 2));

TEST(OneDeviceStrategyTest, SingleReplica) {
  auto strategy = OneDeviceStrategy::Create();
  ASSERT_TRUE(strategy.ok());
  EXPECT_EQ((*strategy)->num_replicas_in_sync(), 1);
  // One replica: reducing across replicas leaves the value as it is; along axis 0 it sums.
  auto sum = (*strategy)->Reduce(ReduceOp::kSum, F32({1, 2}), kNoAxis);
  ASSERT_TRUE(sum.ok()) << sum.status();
  ASSERT_EQ(sum->shape(), Shape{2});
  EXPECT_EQ(sum->data<float>()[0], 1.0f);
  EXPECT_EQ(sum->data<float>()[1], 2.0f);
  auto along0 = (*strategy)->Reduce(ReduceOp::kSum, F32({1, 2}), 0);
  ASSERT_TRUE(along0.ok()) << along0.status();
  EXPECT_EQ(along0->num_elements(), 1);
  EXPECT_EQ(along0->data<float>()[0], 3.0f);
  auto result = (*strategy)->Run(
      [](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
        return ctx.AllReduce(ReduceOp::kMean, Tensor::Scalar<float>(5));
      });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ((*strategy)->ExperimentalLocalResults(*result)[0].data<float>()[0], 5);
}

TEST(DevicesTest, MisuseIsRefusedClearly) {
  MirroredStrategyOptions options;
  options.available.num_cpu_devices = 2;
  options.devices = {"/cpu:0", "/cpu:7"};
  auto missing = MirroredStrategy::Create(options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/cpu:7"));
  options.devices = {"/gpu:0"};
  EXPECT_EQ(MirroredStrategy::Create(options).status().code(), absl::StatusCode::kNotFound);
  options.devices = {"/tpu:0"};
  EXPECT_EQ(MirroredStrategy::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.devices = {};
  options.communication.implementation = CommunicationOptions::Implementation::kNccl;
  auto nccl = MirroredStrategy::Create(options);  // CPU replicas (communication_backend.h)
  EXPECT_EQ(nccl.status().code(), BuiltWithCuda() ? absl::StatusCode::kInvalidArgument
                                                  : absl::StatusCode::kUnimplemented);
  EXPECT_THAT(nccl.status().message(), HasSubstr("communication.implementation: NCCL"));
  auto one_missing = OneDeviceStrategy::Create("/cpu:3");
  EXPECT_EQ(one_missing.status().code(), absl::StatusCode::kNotFound) << one_missing.status();
  EXPECT_THAT(one_missing.status().message(), HasSubstr("/cpu:3"));
  // A backend a job's plan decided is taken as given; only this worker's facts are checked:
  // NCCL without NCCL here is FAILED_PRECONDITION saying so, not a rule of the job.
  options.communication.implementation = CommunicationOptions::Implementation::kAuto;
  options.communication.backend = CollectiveBackend::kNccl;
  if (!BuiltWithCuda()) {
    auto no_nccl = MirroredStrategy::Create(options);
    EXPECT_EQ(no_nccl.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(no_nccl.status().message(), HasSubstr("a fact of this worker"));
  }
  options.communication.backend = CollectiveBackend::kLockstep;
  auto planned = MirroredStrategy::Create(options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  // BF16 compression only shrinks what workers exchange; a one-worker strategy has nothing
  // to compress (a job's lowering refuses it for them, jobspec/rules.h) and runs as given.
  options.communication.compression = collectives::Compression::kBF16;
  EXPECT_TRUE(MirroredStrategy::Create(options).ok());
  CentralStorageStrategyOptions central;
  central.communication.compression = collectives::Compression::kBF16;
  EXPECT_TRUE(CentralStorageStrategy::Create(central).ok());
}

TEST(MirroredStrategyTest, DefaultsToEveryLogicalCpuDevice) {
  MirroredStrategyOptions options;
  options.available.num_cpu_devices = 4;
  auto strategy = MirroredStrategy::Create(options);
  ASSERT_TRUE(strategy.ok());
  EXPECT_EQ((*strategy)->num_replicas_in_sync(), 4);
  EXPECT_EQ((*strategy)->extended().worker_devices()[3], engine::Device::Cpu(3));
  EXPECT_FALSE((*strategy)->cluster_resolver().has_value());
}

TEST(MirroredStrategyTest, AllReduceTimesOutWhenAReplicaNeverJoins) {
  MirroredStrategyOptions options;
  options.available.num_cpu_devices = 2;
  options.communication.timeout = absl::Milliseconds(100);
  auto strategy = MirroredStrategy::Create(options);
  ASSERT_TRUE(strategy.ok());
  auto result = (*strategy)->Run(
      [](ReplicaContext& ctx, const std::vector<Tensor>&) -> absl::StatusOr<Tensor> {
        if (ctx.replica_id_in_sync_group() == 1) return Tensor::Scalar<float>(0);
        return ctx.AllReduce(ReduceOp::kSum, Tensor::Scalar<float>(1));
      });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace lockstep::distribute

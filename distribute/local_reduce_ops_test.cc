#include "distribute/local_reduce_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "distribute/distributed_dataset.h"
#include "distribute/test_sources.h"

namespace lockstep::distribute {
namespace {

using engine::Shape;
using engine::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

TEST(LocalReduceOpsTest, SuccessiveAllReducesMatchByOrder) {
  LocalReduceOps ops(3, 3, nullptr, 0);
  std::vector<Tensor> a(3), b(3);
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      a[r] = Tensor::FromVector<float>({1.0f * r, 1}, Shape{2});
      b[r] = Tensor::Scalar<double>(r);
      auto pa = ops.AllReduceAsync(r, ReduceOp::kSum, &a[r], Soon());
      auto pb = ops.AllReduceAsync(r, ReduceOp::kMean, &b[r], Soon());
      status[r] = pa->Wait();
      status[r].Update(pb->Wait());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_THAT(a[r].ToVector<float>(), ElementsAre(3, 3));
    EXPECT_EQ(b[r].data<double>()[0], 1.0);
  }
}

TEST(LocalReduceOpsTest, ReplicasSharingOneBufferEachCountOnce) {
  // The sum accumulates in replica 0's tensor unless another replica's tensor shares its
  // memory; summing in place there would count replica 0's contribution again.
  LocalReduceOps ops(3, 3, nullptr, 0);
  Tensor x = Tensor::FromVector<float>({1, 2}, Shape{2});
  std::vector<Tensor> views(3, x);  // one buffer, three replicas
  ASSERT_EQ(views[2].raw_data(), x.raw_data());
  std::vector<std::unique_ptr<PendingAllReduce>> pending;
  for (int r = 0; r < 3; ++r)
    pending.push_back(ops.AllReduceAsync(r, ReduceOp::kSum, &views[r], Soon()));
  for (auto& p : pending) ASSERT_TRUE(p->Wait().ok());
  EXPECT_THAT(x.ToVector<float>(), ElementsAre(3, 6));
}

TEST(LocalReduceOpsTest, OneReplicaKeepsItsTensorInPlace) {
  LocalReduceOps ops(1, 1, nullptr, 0);
  Tensor x = Tensor::FromVector<float>({1.5f, -2}, Shape{2});
  const void* before = x.raw_data();
  ASSERT_TRUE(ops.AllReduceAsync(0, ReduceOp::kSum, &x, Soon())->Wait().ok());
  ASSERT_TRUE(ops.AllReduceAsync(0, ReduceOp::kMean, &x, Soon())->Wait().ok());
  EXPECT_EQ(x.raw_data(), before);
  EXPECT_THAT(x.ToVector<float>(), ElementsAre(1.5f, -2));
}

TEST(LocalReduceOpsTest, ReplicasDisagreeingOnShapeGetAnError) {
  LocalReduceOps ops(2, 2, nullptr, 0);
  Tensor x = Tensor::FromVector<float>({1, 2}, Shape{2});
  Tensor y = Tensor::FromVector<float>({1, 2, 3}, Shape{3});
  auto px = ops.AllReduceAsync(0, ReduceOp::kSum, &x, Soon());
  auto py = ops.AllReduceAsync(1, ReduceOp::kSum, &y, Soon());
  absl::Status s = px->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("local replica 1 has f32[3]"));
  EXPECT_EQ(py->Wait().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalReduceOpsTest, AbortEndsAWaitingReplica) {
  LocalReduceOps ops(2, 2, nullptr, 0);
  Tensor x = Tensor::Scalar<float>(1);
  auto p = ops.AllReduceAsync(0, ReduceOp::kSum, &x, absl::InfiniteFuture());
  std::thread aborter([&] { ops.Abort(); });
  EXPECT_EQ(p->Wait().code(), absl::StatusCode::kAborted);
  aborter.join();
  Tensor y = Tensor::Scalar<float>(1);
  EXPECT_EQ(ops.AllReduceAsync(1, ReduceOp::kSum, &y, Soon())->Wait().code(),
            absl::StatusCode::kAborted);
}

TEST(DistributedDatasetTest, StopsCleanlyMidIterationAndWithoutPrefetch) {
  for (int prefetch : {0, 1, 3}) {
    auto it = TensorSliceSource({Range(100)}).make(ShardSpec{}, 4);
    ASSERT_TRUE(it.ok());
    DistributedDataset dataset(std::move(*it), DistributedDataset::Mode::kSplitBatches,
                               {engine::Device::Cpu(0), engine::Device::Cpu(1)}, 2, ShardPlan{},
                               prefetch);
    auto step = dataset.Next();
    ASSERT_TRUE(step.ok() && step->has_value());
    EXPECT_THAT((**step)[0].component(1).ToVector<int64_t>(), ElementsAre(2, 3));
    // The destructor stops the prefetch thread with steps still queued.
  }
}

TEST(DistributedDatasetTest, ResumesFromASavedStep) {
  for (int prefetch : {0, 2}) {
    auto it = TensorSliceSource({Range(10)}).make(ShardSpec{}, 4);
    ASSERT_TRUE(it.ok());
    DistributedDataset dataset(std::move(*it), DistributedDataset::Mode::kSplitBatches,
                               {engine::Device::Cpu(0), engine::Device::Cpu(1)}, 2, ShardPlan{},
                               prefetch, /*start_step=*/1);
    EXPECT_EQ(dataset.steps_returned(), 1);
    auto step = dataset.Next();
    ASSERT_TRUE(step.ok() && step->has_value());
    EXPECT_THAT((**step)[0].component(0).ToVector<int64_t>(), ElementsAre(4, 5));
    EXPECT_EQ(dataset.steps_returned(), 2);
    ASSERT_TRUE(dataset.Next()->has_value());  // [8, 9] / []
    EXPECT_FALSE(dataset.Next()->has_value());
    EXPECT_EQ(dataset.steps_returned(), 3);
  }
}

}  // namespace
}  // namespace lockstep::distribute

#include "worker/partition_group.h"

#include "common/cluster_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Partition Make(const ClusterMap& cluster, const TaskRef& task) {
  v1::Partition p;
  p.set_job_id("job-000003");
  p.set_attempt(2);
  ToProto(cluster, p.mutable_cluster());
  ToProto(task, p.mutable_task());
  return p;
}

const ClusterMap kGroup = {{"worker", {"h0:1", "h1:1", "h2:1"}}, {"evaluator", {"h9:1"}}};

TEST(PartitionGroupTest, RankChiefAndEvaluatorFollowFromClusterAndTask) {
  const v1::Partition chief = Make(kGroup, {"worker", 0});
  const v1::Partition w2 = Make(kGroup, {"worker", 2});
  const v1::Partition eval = Make(kGroup, {"evaluator", 0});
  for (const v1::Partition* p : {&chief, &w2, &eval}) {
    EXPECT_TRUE(CheckPartitionGroup(*p).ok()) << CheckPartitionGroup(*p);
    EXPECT_EQ(NumWorkers(*p), 3);
    EXPECT_TRUE(HasEvaluator(*p));
  }
  EXPECT_EQ(WorkerRank(chief), 0);
  EXPECT_TRUE(IsChief(chief));
  EXPECT_FALSE(IsEvaluator(chief));
  EXPECT_EQ(WorkerRank(w2), 2);
  EXPECT_FALSE(IsChief(w2));
  EXPECT_EQ(WorkerRank(eval), -1);
  EXPECT_FALSE(IsChief(eval));
  EXPECT_TRUE(IsEvaluator(eval));

  const v1::Partition alone = Make({{"worker", {"h0:1"}}}, {"worker", 0});
  EXPECT_EQ(NumWorkers(alone), 1);
  EXPECT_FALSE(HasEvaluator(alone));
}

TEST(PartitionGroupTest, TfConfigIsTheTypedGroup) {
  absl::StatusOr<TfConfig> tf = PartitionTfConfig(Make(kGroup, {"worker", 1}));
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_THAT(tf->cluster().at("worker"), ElementsAre("h0:1", "h1:1", "h2:1"));
  EXPECT_EQ(tf->task(), (TaskRef{"worker", 1}));
  EXPECT_EQ(tf->address(), "h1:1");
  EXPECT_EQ(tf->num_workers(), 3);
}

// Every refusal names the job, the attempt and the Partition field.
TEST(PartitionGroupTest, RefusesWhatTheCoordinatorNeverSends) {
  struct Case {
    v1::Partition partition;
    std::string message;
  };
  v1::Partition no_task = Make(kGroup, {"worker", 0});
  no_task.clear_task();
  const Case cases[] = {
      {no_task, "partition.task of job job-000003 attempt 2: is missing"},
      // A coordinator older than the typed group sends none (its TF_CONFIG text is dropped).
      {Make({}, {"worker", 0}),
       "partition.cluster of job job-000003 attempt 2: is empty; a "
       "coordinator older than this worker"},
      {Make(kGroup, {"worker", 3}),
       "partition.task of job job-000003 attempt 2: TF_CONFIG "
       "task.index: 3 is out of range"},
      {Make({{"worker", {"h0:1", "h0:1"}}}, {"worker", 0}),
       "partition.cluster of job job-000003 attempt 2: TF_CONFIG cluster.worker[1]"},
      {Make({{"worker", {"h0:1"}}, {"ps", {"h1:1"}}}, {"ps", 0}),
       "partition.cluster of job job-000003 attempt 2: has a chief or ps task"},
      {Make({{"worker", {"h0:1"}}}, {"evaluator", 0}),
       "partition.cluster of job job-000003 attempt 2: has no evaluator"},
  };
  for (const Case& c : cases) {
    absl::Status s = CheckPartitionGroup(c.partition);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

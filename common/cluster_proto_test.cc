#include "common/cluster_proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ClusterSpec Spec(const ClusterMap& cluster) {
  v1::ClusterSpec spec;
  ToProto(cluster, &spec);
  return spec;
}

v1::TaskId Task(const std::string& type, int index) {
  v1::TaskId t;
  ToProto(TaskRef{type, index}, &t);
  return t;
}

TEST(ClusterProtoTest, TaskAndClusterRoundTrip) {
  const ClusterMap cluster = {{"worker", {"h0:1", "h1:1", "h2:1"}}, {"evaluator", {"h3:1"}}};
  EXPECT_EQ(FromProto(Spec(cluster)), cluster);
  EXPECT_EQ(FromProto(Task("worker", 2)), (TaskRef{"worker", 2}));
  // Index order is kept: rank order is what the partitioner writes.
  EXPECT_THAT(FromProto(Spec(cluster)).at("worker"), ElementsAre("h0:1", "h1:1", "h2:1"));
}

TEST(ClusterProtoTest, TfConfigFromProtoFollowsTfConfigsRules) {
  const v1::ClusterSpec spec = Spec({{"worker", {"h0:1", "[::1]:2"}}, {"evaluator", {"h3:1"}}});
  absl::StatusOr<TfConfig> w1 = TfConfigFromProto(spec, Task("worker", 1));
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(w1->num_workers(), 2);
  EXPECT_FALSE(w1->is_chief());
  EXPECT_EQ(w1->address(), "[::1]:2");
  absl::StatusOr<TfConfig> w0 = TfConfigFromProto(spec, Task("worker", 0));
  ASSERT_TRUE(w0.ok()) << w0.status();
  EXPECT_TRUE(w0->is_chief());
  absl::StatusOr<TfConfig> e = TfConfigFromProto(spec, Task("evaluator", 0));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->is_evaluator());
  EXPECT_EQ(e->num_workers(), 2);  // the evaluator is outside the training group
}

// The typed spec is held to the same rules as a TF_CONFIG file, with the same field names.
TEST(ClusterProtoTest, TfConfigFromProtoRefusesWhatTfConfigRefuses) {
  struct Case {
    v1::ClusterSpec cluster;
    v1::TaskId task;
    std::string field;
  };
  v1::ClusterSpec empty_list;
  (*empty_list.mutable_jobs())["worker"];
  const Case cases[] = {
      {v1::ClusterSpec(), Task("worker", 0), "TF_CONFIG cluster: is empty"},
      {empty_list, Task("worker", 0), "TF_CONFIG cluster.worker: is an empty list"},
      {Spec({{"worker", {"h0:1"}}}), Task("worker", 1), "TF_CONFIG task.index: 1 is out of range"},
      {Spec({{"worker", {"h0:1"}}}), Task("", 0), "TF_CONFIG task.type"},
      {Spec({{"worker", {"h0:1", "h0:1"}}}), Task("worker", 0), "cluster.worker[1]"},
      {Spec({{"worker", {"nonsense"}}}), Task("worker", 0), "cluster.worker[0]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TfConfig> tf = TfConfigFromProto(c.cluster, c.task);
    EXPECT_TRUE(absl::IsInvalidArgument(tf.status())) << c.field << ": " << tf.status();
    EXPECT_THAT(std::string(tf.status().message()), HasSubstr(c.field));
  }
}

// What a process reads as TF_CONFIG is rendered from the typed spec by TfConfig::ToJson and
// parses back to the same group.
TEST(ClusterProtoTest, RenderedTfConfigParsesBackToTheTypedSpec) {
  const v1::ClusterSpec spec = Spec({{"worker", {"h0:1", "h1:1"}}});
  absl::StatusOr<TfConfig> tf = TfConfigFromProto(spec, Task("worker", 1));
  ASSERT_TRUE(tf.ok()) << tf.status();
  absl::StatusOr<TfConfig> back = TfConfig::Parse(tf->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cluster(), FromProto(spec));
  EXPECT_EQ(back->task(), (TaskRef{"worker", 1}));
}

}  // namespace
}  // namespace lockstep

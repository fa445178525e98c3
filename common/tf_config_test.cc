#include "common/tf_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// Expects Parse() to refuse `json` with INVALID_ARGUMENT mentioning every fragment.
void ExpectRefused(const std::string& json, std::vector<std::string> fragments) {
  absl::StatusOr<TfConfig> c = TfConfig::Parse(json);
  ASSERT_TRUE(absl::IsInvalidArgument(c.status())) << json << ": " << c.status();
  for (const std::string& f : fragments) {
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(f)) << json;
  }
}

// tensorflow.org "Multi-worker training with Keras".
TEST(TfConfigTest, TensorFlowKerasMultiWorkerExample) {
  auto c = TfConfig::Parse(R"({
      "cluster": {"worker": ["localhost:12345", "localhost:23456"]},
      "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), "worker");
  EXPECT_EQ(c->task_index(), 0);
  EXPECT_EQ(c->num_workers(), 2);
  EXPECT_TRUE(c->is_chief());  // no chief task: worker 0 is the chief
  EXPECT_EQ(c->address(), "localhost:12345");
  EXPECT_EQ(c->rpc_layer(), "");
}

// TFConfigClusterResolver's docstring (ports made numeric), worker 1 with ps.
TEST(TfConfigTest, TensorFlowClusterResolverExample) {
  auto c = TfConfig::Parse(R"({
      "cluster": {"worker": ["host1:2222", "host2:2222", "host3:2222"],
                  "ps": ["host4:2222", "host5:2222"]},
      "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->is_chief());
  EXPECT_EQ(c->num_workers(), 3);  // ps are not workers
  EXPECT_EQ(c->chief(), (TaskRef{"worker", 0}));
}

// tf.estimator.RunConfig docs: chief, workers, ps; the evaluator is not in the cluster.
TEST(TfConfigTest, TensorFlowRunConfigEvaluatorOutsideCluster) {
  auto c = TfConfig::Parse(R"({
      "cluster": {"chief": ["host0:2222"], "ps": ["host1:2222", "host2:2222"],
                  "worker": ["host3:2222", "host4:2222", "host5:2222"]},
      "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_evaluator());
  EXPECT_FALSE(c->is_chief());
  EXPECT_EQ(c->num_workers(), 4);  // chief + 3 workers
  EXPECT_EQ(c->chief(), (TaskRef{"chief", 0}));
  EXPECT_EQ(c->address(), "");
}

// DESIGN.md's example: every task type, and the rpc_layer.
TEST(TfConfigTest, AllTaskTypesAndRpcLayer) {
  auto c = TfConfig::Parse(R"({
      "cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"],
                  "ps": ["host3:2222"], "evaluator": ["host4:2222"]},
      "task": {"type": "chief", "index": 0}, "rpc_layer": "grpc"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_chief());
  EXPECT_EQ(c->num_workers(), 3);  // evaluator outside the training group
  EXPECT_EQ(c->rpc_layer(), "grpc");
}

// Kubeflow TFJob operator's generated TF_CONFIG (with its "environment" key).
TEST(TfConfigTest, KubeflowTfJobExample) {
  auto c = TfConfig::Parse(R"({"cluster":{"chief":["dist-mnist-chief-0.kubeflow.svc:2222"],)"
                           R"("ps":["dist-mnist-ps-0.kubeflow.svc:2222"],)"
                           R"("worker":["dist-mnist-worker-0.kubeflow.svc:2222",)"
                           R"("dist-mnist-worker-1.kubeflow.svc:2222"]},)"
                           R"("task":{"type":"worker","index":1},"environment":"cloud"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->address(), "dist-mnist-worker-1.kubeflow.svc:2222");
  EXPECT_EQ(c->num_workers(), 3);
  EXPECT_FALSE(c->is_chief());
}

TEST(TfConfigTest, Ipv6AddressesAreValid) {
  auto c = TfConfig::Parse(R"({"cluster": {"worker": ["[::1]:2222", "[fe80::1]:2223"]},
                               "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->address(), "[fe80::1]:2223");
}

TEST(TfConfigTest, PsTaskAccepted) {
  auto c = TfConfig::Parse(R"({"cluster": {"worker": ["a:1"], "ps": ["b:1"]},
                               "task": {"type": "ps", "index": 0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->is_chief());
}

TEST(TfConfigTest, ToJsonRoundTrips) {
  auto c = TfConfig::Parse(R"({"cluster": {"chief": ["a:1"], "worker": ["b:2", "c:3"]},
                               "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"})");
  ASSERT_TRUE(c.ok());
  auto again = TfConfig::Parse(c->ToJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cluster(), c->cluster());
  EXPECT_EQ(again->task(), c->task());
  EXPECT_EQ(again->rpc_layer(), "grpc");
}

TEST(TfConfigTest, CreateValidatesLikeParse) {
  EXPECT_TRUE(TfConfig::Create({{"worker", {"a:1", "b:1"}}}, {"worker", 1}).ok());
  auto bad = TfConfig::Create({{"worker", {"a:1"}}}, {"worker", 3});
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("task.index"));
}

TEST(TfConfigTest, RefusesNotJson) { ExpectRefused("{cluster", {"not valid JSON"}); }
TEST(TfConfigTest, RefusesNonObject) { ExpectRefused("[1, 2]", {"JSON object"}); }

TEST(TfConfigTest, RefusesMissingCluster) {
  ExpectRefused(R"({"task": {"type": "worker", "index": 0}})", {"cluster", "missing"});
}

TEST(TfConfigTest, RefusesMissingTask) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}})", {"task", "missing"});
}

TEST(TfConfigTest, RefusesEmptyCluster) {
  ExpectRefused(R"({"cluster": {}, "task": {"type": "worker", "index": 0}})", {"cluster", "empty"});
}

TEST(TfConfigTest, RefusesEmptyAddressList) {
  ExpectRefused(R"({"cluster": {"worker": []}, "task": {"type": "worker", "index": 0}})",
                {"cluster.worker", "empty list"});
}

TEST(TfConfigTest, RefusesUnknownTaskTypeInTask) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "master", "index": 0}})",
                {"task.type", "\"master\"", "chief, worker, ps or evaluator"});
}

TEST(TfConfigTest, RefusesUnknownTaskTypeInCluster) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"], "trainer": ["b:1"]},
                    "task": {"type": "worker", "index": 0}})",
                {"cluster.trainer", "unknown task type"});
}

TEST(TfConfigTest, RefusesTaskTypeMissingFromCluster) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}})",
                {"task.type", "no entry in cluster"});
}

TEST(TfConfigTest, RefusesIndexOutOfRange) {
  ExpectRefused(
      R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}})",
      {"task.index", "out of range", "0..1"});
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})",
                {"task.index"});
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "evaluator", "index": 1}})",
                {"task.index", "one evaluator"});
}

TEST(TfConfigTest, RefusesNonIntegerIndex) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}})",
                {"task.index", "integer"});
}

TEST(TfConfigTest, RefusesTwoChiefs) {
  ExpectRefused(R"({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}})",
                {"cluster.chief", "at most one chief"});
}

TEST(TfConfigTest, RefusesTwoEvaluators) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"], "evaluator": ["b:1", "c:1"]},
                    "task": {"type": "worker", "index": 0}})",
                {"cluster.evaluator", "at most one evaluator"});
}

TEST(TfConfigTest, RefusesBadAddresses) {
  const char* kBad[] = {"host",     "host:",    ":2222", "host:0",    "host:65536",
                        "host:22x", "::1:2222", "[::1]", "[::1:2222", "ho st:1"};
  for (const char* a : kBad) {
    ExpectRefused(absl::StrCat(R"({"cluster": {"worker": ["ok:1", ")", a,
                               R"("]}, "task": {"type": "worker", "index": 0}})"),
                  {"cluster.worker[1]"});
  }
  ExpectRefused(R"({"cluster": {"worker": [7]}, "task": {"type": "worker", "index": 0}})",
                {"cluster.worker[0]", "string"});
  ExpectRefused(R"({"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}})",
                {"cluster.worker", "list"});
}

TEST(TfConfigTest, RefusesDuplicateAddresses) {
  ExpectRefused(R"({"cluster": {"chief": ["a:1"], "worker": ["b:1", "a:1"]},
                    "task": {"type": "worker", "index": 0}})",
                {"cluster.worker[1]", "\"a:1\"", "cluster.chief[0]"});
}

TEST(TfConfigTest, RefusesBadRpcLayer) {
  ExpectRefused(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0},
                    "rpc_layer": 3})",
                {"rpc_layer"});
}

}  // namespace
}  // namespace lockstep

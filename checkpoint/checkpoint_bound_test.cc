#include "checkpoint/checkpoint_bound.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "engine/model_builder.h"
#include "engine/optimizer.h"
#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockstep/v1/checkpoint.pb.h"

namespace lockstep {
namespace checkpoint {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A real checkpoint of `spec` (every variable and optimizer slot, as a trainer saves them),
// encoded as it travels.
std::string EncodedCheckpoint(const v1::JobSpec& spec, int* tensors) {
  absl::StatusOr<engine::Graph> graph = engine::BuildModel(spec.model());
  EXPECT_TRUE(graph.ok()) << graph.status();
  v1::Checkpoint c;
  c.set_job_id("job-000123");
  c.set_job_uid("job-000123@0123456789abcdef");
  c.set_global_step(1234567);
  c.set_created_unix_micros(1700000000000000);
  c.mutable_data_position()->set_iterator_state(std::string(64, 'i'));
  for (const engine::VariableInfo& v : graph->Variables()) {
    *c.add_variables() = engine::Tensor::Zeros(v.dtype, v.shape).ToNamedProto(v.name);
  }
  auto optimizer = engine::Optimizer::Create(spec.optimizer(), graph->Variables());
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  for (v1::NamedTensor& t : (*optimizer)->SaveState()) *c.add_optimizer_slots() = std::move(t);
  *tensors = c.variables_size() + c.optimizer_slots_size();
  absl::StatusOr<std::string> bytes = CheckpointManager::Encode(c);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *std::move(bytes) : std::string();
}

class CheckpointBoundTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
};

TEST_P(CheckpointBoundTest, HoldsEveryCheckpointOfTheJobAndLittleMore) {
  const auto& [model, optimizer] = GetParam();
  v1::JobSpec spec;
  auto m = engine::ParseModelSpecJson(ReadText(absl::StrCat("examples/", model, ".json")));
  ASSERT_TRUE(m.ok()) << m.status();
  *spec.mutable_model() = *m;
  auto o = engine::ParseOptimizerSpecJson(optimizer);
  ASSERT_TRUE(o.ok()) << o.status();
  *spec.mutable_optimizer() = *o;
  int tensors = 0;
  const int64_t actual = static_cast<int64_t>(EncodedCheckpoint(spec, &tensors).size());
  absl::StatusOr<int64_t> bound = CheckpointBytesBound(spec);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_GE(*bound, actual);
  // Tight enough to matter: the allowance and a few hundred bytes of framing per tensor.
  EXPECT_LE(*bound - actual, kCheckpointFixedAllowance + 512 * tensors)
      << "actual " << actual << ", bound " << *bound;
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndOptimizers, CheckpointBoundTest,
    ::testing::Combine(
        ::testing::Values("digits_mlp", "digits_cnn", "digits_residual"),
        ::testing::Values(R"({"adam": {}, "learningRate": {"constant": {"value": 0.1}}})",
                          R"({"momentum": {}, "learningRate": {"constant": {"value": 0.1}}})",
                          R"({"sgd": {}, "learningRate": {"constant": {"value": 0.1}}})")));

TEST(CheckpointBytesBound, AModelThatDoesNotBuildIsRefused) {
  v1::JobSpec spec;
  const absl::Status refused = CheckpointBytesBound(spec).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("input_shape"), std::string::npos) << refused;
}

}  // namespace
}  // namespace checkpoint
}  // namespace lockstep

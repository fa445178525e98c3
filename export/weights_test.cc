#include "export/weights.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::exporting {
namespace {

using ::testing::HasSubstr;

v1::NamedTensor F32(const std::string& name, std::vector<int64_t> dims, int elements) {
  v1::NamedTensor t;
  t.set_name(name);
  t.mutable_tensor()->set_dtype(v1::F32);
  for (int64_t d : dims) t.mutable_tensor()->mutable_shape()->add_dims(d);
  std::string bytes(elements * 4, '\0');
  for (int i = 0; i < elements; ++i) {
    const float v = 0.5f * i - 1;
    std::memcpy(&bytes[i * 4], &v, 4);
  }
  t.mutable_tensor()->set_content(bytes);
  return t;
}

v1::Checkpoint Small() {
  v1::Checkpoint c;
  c.set_job_id("digits");
  c.set_job_uid("job-1@2");
  c.set_attempt(3);
  c.set_global_step(42);
  *c.add_variables() = F32("dense/kernel", {2, 3}, 6);
  *c.add_variables() = F32("dense/bias", {3}, 3);
  *c.add_optimizer_slots() = F32("dense/kernel/m", {2, 3}, 6);
  return c;
}

TEST(Weights, VariablesOnlyUnlessSlotsAreAskedFor) {
  auto w = WeightsFromCheckpoint(Small(), {});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->tensors.size(), 2u);
  EXPECT_EQ(w->tensors[0].name(), "dense/kernel");
  EXPECT_EQ(w->tensors[1].name(), "dense/bias");
  EXPECT_EQ(w->metadata.at("job_id"), "digits");
  EXPECT_EQ(w->metadata.at("job_uid"), "job-1@2");
  EXPECT_EQ(w->metadata.at("step"), "42");
  EXPECT_EQ(w->metadata.at("attempt"), "3");
  EXPECT_EQ(w->metadata.count("spec"), 0u);

  WeightsOptions options;
  options.with_optimizer_state = true;
  options.spec_json = "{}";
  auto all = WeightsFromCheckpoint(Small(), options);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->tensors.size(), 3u);
  EXPECT_EQ(all->tensors[2].name(), "dense/kernel/m");
  EXPECT_EQ(all->tensors[2].tensor().content(), Small().optimizer_slots(0).tensor().content());
  EXPECT_EQ(all->metadata.at("spec"), "{}");
  EXPECT_EQ(all->metadata.at("optimizer_state"), "true");
}

TEST(Weights, BadTensorsAreRefusedNamingThem) {
  v1::Checkpoint short_content = Small();
  short_content.mutable_variables(1)->mutable_tensor()->mutable_content()->pop_back();
  absl::Status s = WeightsFromCheckpoint(short_content, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("variable dense/bias: holds 11 bytes"));

  v1::Checkpoint no_dtype = Small();
  no_dtype.mutable_optimizer_slots(0)->mutable_tensor()->clear_dtype();
  EXPECT_TRUE(WeightsFromCheckpoint(no_dtype, {}).ok()) << "slots are not read unless asked";
  WeightsOptions slots;
  slots.with_optimizer_state = true;
  EXPECT_THAT(std::string(WeightsFromCheckpoint(no_dtype, slots).status().message()),
              HasSubstr("optimizer slot dense/kernel/m: unknown dtype"));

  v1::Checkpoint twice = Small();
  *twice.add_variables() = twice.variables(0);
  EXPECT_THAT(std::string(WeightsFromCheckpoint(twice, {}).status().message()),
              HasSubstr("dense/kernel: the name appears twice"));

  v1::Checkpoint empty;
  empty.set_job_id("j");
  EXPECT_THAT(std::string(WeightsFromCheckpoint(empty, {}).status().message()),
              HasSubstr("holds no variables"));
}

TEST(Weights, ElementCounts) {
  v1::TensorShape scalar;
  EXPECT_EQ(NumElements(scalar), 1);
  v1::TensorShape s;
  s.add_dims(4);
  s.add_dims(0);
  EXPECT_EQ(NumElements(s), 0);
  s.add_dims(-1);
  EXPECT_EQ(NumElements(s), -1);
  EXPECT_EQ(ElementSize(v1::BF16), 2u);
  EXPECT_EQ(ElementSize(v1::I64), 8u);
  EXPECT_EQ(ElementSize(v1::DTYPE_UNSPECIFIED), 0u);
}

}  // namespace
}  // namespace lockstep::exporting

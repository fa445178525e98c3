#include "worker/init_from.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;

v1::NamedTensor F32(const std::string& name, std::vector<int64_t> dims, char fill) {
  v1::NamedTensor t;
  t.set_name(name);
  t.mutable_tensor()->set_dtype(v1::F32);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.mutable_tensor()->mutable_shape()->add_dims(d);
    n *= d;
  }
  t.mutable_tensor()->set_content(std::string(n * 4, fill));
  return t;
}

const std::vector<v1::NamedTensor> kModel = {
    F32("hidden/kernel", {4, 3}, 0), F32("hidden/bias", {3}, 0), F32("logits/bias", {2}, 0)};

TEST(InitFrom, TheExportsValuesInTheModelsOrderWithFreshSlots) {
  exporting::Weights w;
  w.tensors = {F32("logits/bias", {2}, 'c'), F32("hidden/kernel", {4, 3}, 'a'),
               F32("hidden/bias", {3}, 'b'), F32("hidden/kernel/m", {4, 3}, 'z')};
  auto c = InitialCheckpoint(w, "m.safetensors", kModel, {F32("hidden/kernel/m", {4, 3}, 0)});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->variables_size(), 3);
  EXPECT_EQ(c->variables(0).name(), "hidden/kernel");
  EXPECT_EQ(c->variables(0).tensor().content(), std::string(48, 'a'));
  EXPECT_EQ(c->variables(2).tensor().content(), std::string(8, 'c'));
  ASSERT_EQ(c->optimizer_slots_size(), 1);
  EXPECT_EQ(c->optimizer_slots(0).tensor().content(), std::string(48, '\0'))
      << "the optimizer starts afresh, whatever the export holds";
  EXPECT_EQ(c->global_step(), 0);
}

TEST(InitFrom, EveryMissingOrMisShapedVariableIsNamed) {
  exporting::Weights w;
  w.tensors = {F32("hidden/kernel", {4, 5}, 'a'), F32("logits/bias", {2}, 'c')};
  w.tensors[1].mutable_tensor()->set_dtype(v1::I32);
  absl::Status s = InitialCheckpoint(w, "/models/m.safetensors", kModel, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("init_from.path: /models/m.safetensors does not fit the model: "
                        "variable \"hidden/kernel\" is F32[4,5] there, F32[4,3] in the model; "
                        "variable \"hidden/bias\" is missing; "
                        "variable \"logits/bias\" is I32[2] there, F32[2] in the model"));
}

}  // namespace
}  // namespace lockstep::worker

#include "export/builtin_formats.h"

#include "export/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::exporting {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BuiltinFormats, OffersEveryFormatOnceAndEachWritesTheCheckpoint) {
  auto registry = BuiltinFormats();
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_THAT(registry->names(), ElementsAre("npz", "onnx", "safetensors"));
  EXPECT_EQ(registry->Find("onnx2"), nullptr);

  v1::Checkpoint c;
  c.set_job_id("digits");
  c.set_global_step(7);
  v1::NamedTensor* v = c.add_variables();
  v->set_name("dense/bias");
  v->mutable_tensor()->set_dtype(v1::F32);
  v->mutable_tensor()->mutable_shape()->add_dims(1);
  v->mutable_tensor()->set_content(std::string(4, '\x3f'));
  ExportRequest request;
  request.checkpoint = &c;
  auto bytes = registry->Find("safetensors")->write(request);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = DecodeSafetensors(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors.at(0).tensor().content(), v->tensor().content());
  EXPECT_EQ(back->metadata.at("step"), "7");
  EXPECT_TRUE(registry->Find("npz")->write(request).ok());

  v->mutable_tensor()->set_content("");
  EXPECT_THAT(std::string(registry->Find("npz")->write(request).status().message()),
              HasSubstr("variable dense/bias: holds 0 bytes"));
}

TEST(FormatRegistry, ANameRegisteredTwiceIsRefused) {
  FormatRegistry r;
  ASSERT_TRUE(RegisterSafetensors(r).ok());
  EXPECT_EQ(RegisterSafetensors(r).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Register({"", "", nullptr}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::exporting

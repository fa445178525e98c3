#include "export/onnx.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx.pb.h"

namespace lockstep::exporting {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void AddVariable(v1::Checkpoint* c, const std::string& name, std::vector<int64_t> dims) {
  v1::NamedTensor* v = c->add_variables();
  v->set_name(name);
  v->mutable_tensor()->set_dtype(v1::F32);
  int64_t n = 1;
  for (int64_t d : dims) {
    v->mutable_tensor()->mutable_shape()->add_dims(d);
    n *= d;
  }
  v->mutable_tensor()->set_content(std::string(n * 4, '\x01'));
}

// The digits MLP's shape, smaller: 6 -> hidden(4) -> relu -> dropout -> logits(3).
struct Mlp {
  v1::JobSpec spec;
  v1::Checkpoint checkpoint;
  Mlp() {
    spec.set_name("mlp");
    spec.mutable_model()->add_input_shape(6);
    v1::Layer* hidden = spec.mutable_model()->add_layers();
    hidden->set_name("hidden");
    hidden->mutable_dense()->set_units(4);
    spec.mutable_model()->add_layers()->mutable_relu();
    spec.mutable_model()->add_layers()->mutable_dropout()->set_rate(0.5);
    spec.mutable_model()->add_layers()->mutable_dense()->set_units(3);  // "dense_3"
    spec.mutable_data()->mutable_train()->set_feature_scale(0.0625f);
    checkpoint.set_job_id("mlp-job");
    checkpoint.set_global_step(9);
    AddVariable(&checkpoint, "hidden/kernel", {6, 4});
    AddVariable(&checkpoint, "hidden/bias", {4});
    AddVariable(&checkpoint, "dense_3/kernel", {4, 3});
    AddVariable(&checkpoint, "dense_3/bias", {3});
  }
  ExportRequest Request() const {
    ExportRequest r;
    r.checkpoint = &checkpoint;
    r.spec = &spec;
    return r;
  }
};

std::vector<std::string> Dims(const onnx::ValueInfoProto& v) {
  std::vector<std::string> out;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    out.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  }
  return out;
}

TEST(Onnx, TheMlpBecomesNodesWithTheScaleInsideAndADynamicBatch) {
  Mlp mlp;
  auto bytes = EncodeOnnx(mlp.Request());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  EXPECT_EQ(m.ir_version(), 8);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).version(), 17);
  std::vector<std::string> ops;
  for (const onnx::NodeProto& n : m.graph().node()) ops.push_back(n.op_type());
  EXPECT_THAT(ops, ElementsAre("Div", "MatMul", "Add", "Relu", "MatMul", "Add", "Identity"));
  EXPECT_EQ(m.graph().input(0).name(), "features");
  EXPECT_THAT(Dims(m.graph().input(0)), ElementsAre("batch", "6"));
  EXPECT_EQ(m.graph().output(0).name(), "output");
  EXPECT_THAT(Dims(m.graph().output(0)), ElementsAre("batch", "3"));
  std::vector<std::string> initializers;
  for (const onnx::TensorProto& t : m.graph().initializer()) initializers.push_back(t.name());
  EXPECT_THAT(initializers, ElementsAre("feature_scale/divisor", "hidden/kernel", "hidden/bias",
                                        "dense_3/kernel", "dense_3/bias"));
  EXPECT_EQ(m.graph().initializer(0).float_data(0), 16.0f);
  EXPECT_EQ(m.graph().initializer(1).raw_data(), mlp.checkpoint.variables(0).tensor().content());
  std::map<std::string, std::string> meta;
  for (const auto& e : m.metadata_props()) meta[e.key()] = e.value();
  EXPECT_EQ(meta["job_id"], "mlp-job");
  EXPECT_EQ(meta["step"], "9");
}

TEST(Onnx, WhatItCannotExpressIsRefusedNamingIt) {
  Mlp mlp;
  ExportRequest no_spec = mlp.Request();
  no_spec.spec = nullptr;
  EXPECT_THAT(std::string(EncodeOnnx(no_spec).status().message()), HasSubstr("--spec"));

  Mlp conv;
  conv.spec.mutable_model()->mutable_layers(1)->mutable_conv2d()->set_filters(2);
  EXPECT_THAT(std::string(EncodeOnnx(conv.Request()).status().message()),
              HasSubstr("layers[1] (conv2d \"conv2d_1\"): ONNX export has no mapping for layer "
                        "kind conv2d"));

  Mlp graph;
  graph.spec.mutable_model()->mutable_layers(3)->add_inputs("hidden");
  EXPECT_THAT(std::string(EncodeOnnx(graph.Request()).status().message()),
              HasSubstr("layers[3].inputs: ONNX export covers sequential models"));

  Mlp missing;
  missing.checkpoint.mutable_variables()->RemoveLast();
  EXPECT_THAT(std::string(EncodeOnnx(missing.Request()).status().message()),
              HasSubstr("the checkpoint has no variable dense_3/bias"));
}

}  // namespace
}  // namespace lockstep::exporting

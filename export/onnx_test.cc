#include "export/onnx.h"

#include <limits>

#include "export/onnx_graph.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
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
  EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
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

  Mlp no_kind;
  no_kind.spec.mutable_model()->mutable_layers(1)->clear_kind();
  EXPECT_THAT(std::string(EncodeOnnx(no_kind.Request()).status().message()),
              HasSubstr("layers[1] ((no kind) \"(no kind)_1\"): ONNX export has no mapping for "
                        "layer kind (no kind)"));

  Mlp graph;
  graph.spec.mutable_model()->mutable_layers(3)->add_inputs("nowhere");
  EXPECT_THAT(std::string(EncodeOnnx(graph.Request()).status().message()),
              HasSubstr("layers[3].inputs[0]: no layer or model input named 'nowhere'"));

  Mlp conv;  // a conv2d over a flat input
  conv.spec.mutable_model()->mutable_layers(1)->mutable_conv2d()->set_filters(2);
  EXPECT_THAT(std::string(EncodeOnnx(conv.Request()).status().message()),
              HasSubstr("layers[1] (conv2d \"conv2d_1\"): the input is not [batch, h, w, "
                        "channels]"));

  Mlp missing;
  missing.checkpoint.mutable_variables()->RemoveLast();
  EXPECT_THAT(std::string(EncodeOnnx(missing.Request()).status().message()),
              HasSubstr("the checkpoint has no variable dense_3/bias"));
}

// Every layer kind the model builder offers (Layer's oneof) has an ONNX mapping.
TEST(Onnx, EveryLayerKindHasAMapping) {
  absl::StatusOr<OnnxLayerRegistry> layers = BuiltinOnnxLayers();
  ASSERT_TRUE(layers.ok()) << layers.status();
  const google::protobuf::OneofDescriptor* kind = v1::Layer::descriptor()->FindOneofByName("kind");
  ASSERT_NE(kind, nullptr);
  ASSERT_GT(kind->field_count(), 10);
  for (int i = 0; i < kind->field_count(); ++i) {
    const auto k = static_cast<v1::Layer::KindCase>(kind->field(i)->number());
    EXPECT_NE(layers->Find(k), nullptr) << kind->field(i)->name();
  }
  EXPECT_EQ(layers->Find(v1::Layer::KIND_NOT_SET), nullptr);
}

// A residual block and an attention block, as the bundled CNN and Transformer use them: the
// named inputs are followed and the shapes carried through.
TEST(Onnx, ResidualAndAttentionGraphsFollowTheirNamedInputs) {
  v1::JobSpec spec;
  v1::Checkpoint checkpoint;
  spec.mutable_model()->add_input_shape(4);
  auto layer = [&](const std::string& name) {
    v1::Layer* l = spec.mutable_model()->add_layers();
    l->set_name(name);
    return l;
  };
  v1::Layer* tok = layer("tok");
  tok->mutable_embedding()->set_input_dim(5);
  tok->mutable_embedding()->set_output_dim(6);
  layer("ln")->mutable_layer_norm();
  v1::Layer* att = layer("att");
  att->mutable_self_attention()->set_num_heads(2);
  att->mutable_self_attention()->set_causal(true);
  v1::Layer* res = layer("res");
  res->mutable_add();
  res->add_inputs("tok");
  res->add_inputs("att");
  layer("act")->mutable_gelu();
  v1::DataSource* train = spec.mutable_data()->mutable_train();  // token ids as int64_lists
  train->set_format(v1::DataSource::TFRECORD);
  train->mutable_tfrecord()->add_features()->set_dtype(v1::TfRecordFeature::INT64);
  AddVariable(&checkpoint, "tok/embeddings", {5, 6});
  AddVariable(&checkpoint, "ln/gamma", {6});
  AddVariable(&checkpoint, "ln/beta", {6});
  AddVariable(&checkpoint, "att/qkv", {6, 18});
  AddVariable(&checkpoint, "att/output", {6, 6});
  ExportRequest r;
  r.checkpoint = &checkpoint;
  r.spec = &spec;
  auto bytes = EncodeOnnx(r);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  EXPECT_THAT(Dims(m.graph().output(0)), ElementsAre("batch", "4", "6"));
  EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::INT64);
  EXPECT_EQ(m.graph().node(0).op_type(), "Cast");
  EXPECT_EQ(m.graph().node(0).input(0), "features");
  std::map<std::string, const onnx::NodeProto*> nodes;
  for (const onnx::NodeProto& n : m.graph().node()) nodes[n.name()] = &n;
  ASSERT_EQ(nodes.count("res"), 1);
  EXPECT_THAT(nodes["res"]->input(), ElementsAre("tok", "att"));
  ASSERT_EQ(nodes.count("att/masked"), 1);
  EXPECT_EQ(nodes["ln"]->op_type(), "LayerNormalization");
  const onnx::TensorProto* mask = nullptr;
  for (const onnx::TensorProto& t : m.graph().initializer()) {
    if (t.name() == "att/causal_mask") mask = &t;
  }
  ASSERT_NE(mask, nullptr);
  EXPECT_THAT(mask->dims(), ElementsAre(4, 4));
  EXPECT_EQ(mask->float_data(0 * 4 + 1), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(mask->float_data(1 * 4 + 0), 0.0f);

  att->mutable_self_attention()->set_num_heads(4);  // 4 does not divide 6
  EXPECT_THAT(std::string(EncodeOnnx(r).status().message()),
              HasSubstr("layers[2] (self_attention \"att\"): num_heads does not divide"));
}

}  // namespace
}  // namespace lockstep::exporting

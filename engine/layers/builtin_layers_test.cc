// The layer registry: every kind of model.proto's Layer oneof has exactly one registered
// builder (a new kind without its engine/layers/ file fails here), registration refuses
// duplicates and kinds outside the oneof, and BuildModel is a lookup in the registry it is
// given (its check before its builder, the model's options passed through).
#include "engine/layers/builtin_layers.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layer_registry.h"
#include "engine/model_builder.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const google::protobuf::OneofDescriptor& KindOneof() {
  const google::protobuf::OneofDescriptor* kind = v1::Layer::descriptor()->FindOneofByName("kind");
  EXPECT_NE(kind, nullptr);
  return *kind;
}

TEST(BuiltinLayers, EveryKindOfTheOneofHasExactlyOneBuilder) {
  const LayerRegistry layers = BuiltinLayers();  // aborts on a kind registered twice
  const google::protobuf::OneofDescriptor& oneof = KindOneof();
  ASSERT_GT(oneof.field_count(), 10);
  std::vector<std::string> oneof_names;
  for (int i = 0; i < oneof.field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = oneof.field(i);
    oneof_names.push_back(field->name());
    const auto kind = static_cast<v1::Layer::KindCase>(field->number());
    const LayerDef* def = layers.Find(kind);
    ASSERT_NE(def, nullptr) << "Layer." << field->name() << " has no builder: add engine/layers/"
                            << field->name() << ".cc and its line in BuiltinLayers()";
    EXPECT_EQ(def->kind, kind);
    EXPECT_EQ(def->name, field->name());
    EXPECT_TRUE(def->build) << field->name();
  }
  // Nothing registered beyond the oneof, and the names (the JSON keys the parser accepts) in
  // the order model.proto declares them.
  EXPECT_EQ(layers.kinds().size(), static_cast<size_t>(oneof.field_count()));
  EXPECT_THAT(layers.names(), ElementsAreArray(oneof_names));
}

TEST(BuiltinLayers, OnlyAddAndConcatJoinSeveralInputs) {
  const LayerRegistry layers = BuiltinLayers();
  std::vector<std::string> joins;
  for (v1::Layer::KindCase kind : layers.kinds()) {
    if (layers.Find(kind)->inputs == LayerInputs::kSeveral)
      joins.push_back(layers.Find(kind)->name);
  }
  EXPECT_THAT(joins, ElementsAreArray({"add", "concat"}));
}

LayerDef Identity(v1::Layer::KindCase kind) {
  return {kind, nullptr, [](const LayerContext& ctx) { return ctx.input(); }};
}

TEST(LayerRegistry, RefusesAKindRegisteredTwice) {
  LayerRegistry r;
  RegisterDense(&r);
  absl::Status twice = r.Register(Identity(v1::Layer::kDense));
  EXPECT_EQ(twice.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("layer kind dense is registered twice"));
  EXPECT_EQ(r.kinds().size(), 1u);
}

TEST(LayerRegistry, BuiltinRegistrationOfADuplicateAborts) {
  EXPECT_DEATH(
      {
        LayerRegistry r;
        RegisterActivations(&r);
        RegisterActivations(&r);
      },
      "engine layer registry: layer kind relu is registered twice");
}

TEST(LayerRegistry, RefusesKindsOutsideTheOneofAndDefsWithoutABuilder) {
  LayerRegistry r;
  for (int number : {0, 1, 20, 999}) {  // KIND_NOT_SET, `name`, `inputs`, no field at all
    absl::Status s = r.Register(Identity(static_cast<v1::Layer::KindCase>(number)));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << number;
    EXPECT_THAT(std::string(s.message()), HasSubstr("is not a field of model.proto's Layer.kind"));
  }
  absl::Status no_builder = r.Register({v1::Layer::kRelu, nullptr, nullptr});
  EXPECT_EQ(no_builder.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_builder.message()),
              HasSubstr("layer kind relu is registered without a builder"));
  EXPECT_TRUE(r.kinds().empty());
  EXPECT_EQ(LayerRegistry::KindName(v1::Layer::kLayerNorm), "layer_norm");
  EXPECT_EQ(LayerRegistry::KindName(v1::Layer::KIND_NOT_SET), "");
}

v1::ModelSpec DenseThenRelu() {
  v1::ModelSpec spec;
  spec.add_input_shape(3);
  spec.set_loss(v1::MSE);
  spec.add_layers()->mutable_dense()->set_units(2);
  spec.add_layers()->mutable_relu();
  return spec;
}

TEST(BuildModel, RefusesAKindTheRegistryLacksNamingIt) {
  LayerRegistry only_dense;
  RegisterDense(&only_dense);
  absl::StatusOr<Graph> g = BuildModel(DenseThenRelu(), only_dense);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("layers[1]: layer kind relu has no builder registered"));

  v1::ModelSpec unset = DenseThenRelu();
  unset.mutable_layers(1)->clear_kind();
  g = BuildModel(unset, only_dense);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("layers[1]: no layer kind set (one of dense)"));
}

// The model builder only looks kinds up: a registry with another relu builds that one, after
// its check, with the model's options.
TEST(BuildModel, IsALookupOfCheckThenBuild) {
  LayerRegistry r;
  RegisterDense(&r);
  std::vector<std::string> calls;
  DType seen_dtype = DType::kI64;
  MustRegister(&r, {v1::Layer::kRelu,
                    [&](const v1::Layer&, absl::string_view where) {
                      calls.push_back("check " + std::string(where));
                      return absl::OkStatus();
                    },
                    [&](const LayerContext& ctx) {
                      calls.push_back("build " + ctx.name);
                      seen_dtype = ctx.options.dtype;
                      return ctx.graph->Op(v1::TANH, {ctx.input()}, ctx.name);
                    }});
  v1::ModelSpec spec = DenseThenRelu();
  spec.set_f64(true);
  absl::StatusOr<Graph> g = BuildModel(spec, r);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(calls, ElementsAreArray({"check layers[1].relu", "build relu_1"}));
  EXPECT_EQ(seen_dtype, DType::kF64);
  EXPECT_EQ(g->proto().nodes(g->output()).op(), v1::TANH);
}

TEST(BuildModel, AFailedCheckStopsBeforeTheBuilder) {
  LayerRegistry r;
  RegisterDense(&r);
  bool built = false;
  MustRegister(&r, {v1::Layer::kRelu,
                    [](const v1::Layer&, absl::string_view where) {
                      return absl::InvalidArgumentError(absl::StrCat(where, ".x: refused"));
                    },
                    [&](const LayerContext& ctx) -> absl::StatusOr<int> {
                      built = true;
                      return ctx.input();
                    }});
  absl::StatusOr<Graph> g = BuildModel(DenseThenRelu(), r);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("layers[1].relu.x: refused"));
  EXPECT_FALSE(built);
}

}  // namespace
}  // namespace lockstep::engine

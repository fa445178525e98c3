#include "engine/model_builder.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace lockstep::engine {
namespace {

// "layerNorm" -> "layer_norm": the proto JSON mapping accepts both spellings of a field.
std::string SnakeCase(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (absl::ascii_isupper(static_cast<unsigned char>(c))) {
      out += '_';
      out += absl::ascii_tolower(static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// The nodes layer `i` takes: those its `inputs` name (earlier layers or model inputs), or
// `previous` when it names none. `def` is null for a kind the registry lacks (refused next).
absl::StatusOr<std::vector<int>> ResolveLayerInputs(const v1::Layer& layer, const LayerDef* def,
                                                    int i,
                                                    const std::map<std::string, int>& outputs,
                                                    int previous) {
  const std::string where = absl::StrCat("layers[", i, "].inputs");
  std::vector<int> xs;
  for (int j = 0; j < layer.inputs_size(); ++j) {
    auto it = outputs.find(layer.inputs(j));
    if (it == outputs.end()) {
      return FieldError(absl::StrCat(where, "[", j, "]"),
                        absl::StrCat("no layer or model input named '", layer.inputs(j),
                                     "' before it (layers take earlier layers' outputs)"));
    }
    xs.push_back(it->second);
  }
  if (xs.empty()) xs.push_back(previous);
  if (def == nullptr) return xs;
  if (def->inputs == LayerInputs::kSeveral) {
    if (layer.inputs_size() < 2) {
      return FieldError(where, absl::StrCat(def->name,
                                            " joins two or more inputs; name them, e.g. "
                                            "\"inputs\": [\"a\", \"b\"]"));
    }
  } else if (xs.size() != 1) {
    return FieldError(where, absl::StrCat(def->name, " takes one input, got ", xs.size()));
  }
  return xs;
}

// Adds layer `ctx.index` through its kind's registered check and builder; returns its
// output node.
absl::StatusOr<int> AddLayer(const LayerRegistry& layers, const LayerDef* def, LayerContext ctx) {
  const v1::Layer& layer = *ctx.layer;
  const std::string where = absl::StrCat("layers[", ctx.index, "]");
  if (def == nullptr) {
    if (layer.kind_case() == v1::Layer::KIND_NOT_SET) {
      return FieldError(where, absl::StrCat("no layer kind set (one of ",
                                            absl::StrJoin(layers.names(), ", "), ")"));
    }
    return FieldError(where, absl::StrCat("layer kind ", LayerRegistry::KindName(layer.kind_case()),
                                          " has no builder registered (engine/layers/)"));
  }
  ctx.where = absl::StrCat(where, ".", def->name);
  if (def->check) LS_RETURN_IF_ERROR(def->check(layer, ctx.where));
  absl::StatusOr<int> y = def->build(ctx);
  if (!y.ok() && !absl::StartsWith(y.status().message(), "layers[")) {
    return Annotate(y.status(), ctx.where);
  }
  return y;
}

// Adds the model's inputs to `g` (one "features" from input_shape, or the named `inputs`)
// and returns them by name, in order.
absl::StatusOr<std::vector<std::pair<std::string, int>>> AddModelInputs(const v1::ModelSpec& spec,
                                                                        DType dtype, Graph* g) {
  if (spec.input_shape().empty() == spec.inputs().empty()) {
    return FieldError("input_shape",
                      spec.inputs().empty()
                          ? "is required, e.g. [64] or [8, 8, 1] (or name several inputs)"
                          : "give input_shape or inputs, not both");
  }
  std::vector<v1::ModelInput> inputs(spec.inputs().begin(), spec.inputs().end());
  if (inputs.empty()) {
    inputs.emplace_back();
    inputs[0].set_name("features");
    *inputs[0].mutable_shape() = spec.input_shape();
  }
  std::vector<std::pair<std::string, int>> nodes;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const v1::ModelInput& in = inputs[k];
    const std::string where =
        spec.inputs().empty() ? "input_shape" : absl::StrCat("inputs[", k, "]");
    const std::string shape_where = spec.inputs().empty() ? where : where + ".shape";
    if (in.name().empty() || in.name() == "labels") {
      return FieldError(where + ".name", "give each input a name other than \"labels\"");
    }
    if (in.shape().empty()) return FieldError(shape_where, "is required, e.g. [64] or [8, 8, 1]");
    std::vector<int64_t> dims = {-1};
    for (int i = 0; i < in.shape_size(); ++i) {
      if (in.shape(i) <= 0) {
        return FieldError(absl::StrCat(shape_where, "[", i, "]"),
                          absl::StrCat(in.shape(i), " must be > 0"));
      }
      dims.push_back(in.shape(i));
    }
    LS_RETURN_IF_ERROR(CheckElements(dims, shape_where, "one example"));
    for (const auto& [name, node] : nodes) {
      if (name == in.name()) {
        return FieldError(where + ".name", absl::StrCat("\"", name, "\" is used twice"));
      }
    }
    LS_ASSIGN_OR_RETURN(int x, g->Input(in.name(), dtype, Shape(dims)));
    nodes.emplace_back(in.name(), x);
  }
  return nodes;
}

// What the spec decides for all its layers, decided once here.
LayerOptions LayerOptionsFor(const v1::ModelSpec& spec) {
  LayerOptions options;
  options.dtype = spec.f64() ? DType::kF64 : DType::kF32;
  return options;
}

}  // namespace

absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec) {
  return BuildModel(spec, BuiltinLayers());
}

absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec, const LayerRegistry& layers) {
  const LayerOptions options = LayerOptionsFor(spec);
  const DType dtype = options.dtype;
  Graph g(spec.seed());
  LS_ASSIGN_OR_RETURN(auto inputs, AddModelInputs(spec, dtype, &g));
  if (spec.layers().empty()) return FieldError("layers", "at least one layer is required");
  if (spec.loss() != v1::SPARSE_CATEGORICAL_CROSSENTROPY && spec.loss() != v1::MSE) {
    return FieldError("loss", "set SPARSE_CATEGORICAL_CROSSENTROPY or MSE");
  }
  // Every name a layer may take as an input: model inputs, then layers as they are added.
  std::map<std::string, int> outputs(inputs.begin(), inputs.end());
  int x = inputs[0].second;
  for (int i = 0; i < spec.layers_size(); ++i) {
    const v1::Layer& layer = spec.layers(i);
    const LayerDef* def = layers.Find(layer.kind_case());
    LayerContext ctx;
    ctx.graph = &g;
    ctx.layer = &layer;
    ctx.index = i;
    ctx.name = layer.name().empty()
                   ? absl::StrCat(LayerRegistry::KindName(layer.kind_case()), "_", i)
                   : layer.name();
    ctx.options = options;
    if (outputs.count(ctx.name) > 0) {
      return FieldError(absl::StrCat("layers[", i, "].name"),
                        absl::StrCat("\"", ctx.name, "\" is used twice"));
    }
    LS_ASSIGN_OR_RETURN(ctx.inputs, ResolveLayerInputs(layer, def, i, outputs, x));
    const std::string name = ctx.name;
    LS_ASSIGN_OR_RETURN(int y, AddLayer(layers, def, std::move(ctx)));
    LS_RETURN_IF_ERROR(
        CheckElements(g.shape(y).dims(), absl::StrCat("layers[", i, "]"), "its output"));
    x = y;
    outputs[name] = x;
  }
  const Shape out = g.shape(x);
  const int last = spec.layers_size() - 1;
  if (!(spec.label_smoothing() >= 0 && spec.label_smoothing() <= 1)) {
    return FieldError("label_smoothing", absl::StrCat(spec.label_smoothing(), " is not in [0, 1]"));
  }
  if (spec.label_smoothing() != 0 && spec.loss() != v1::SPARSE_CATEGORICAL_CROSSENTROPY) {
    return FieldError("label_smoothing", "only for loss SPARSE_CATEGORICAL_CROSSENTROPY");
  }
  if (spec.loss() == v1::SPARSE_CATEGORICAL_CROSSENTROPY) {
    if (out.rank() < 2) {
      return FieldError(absl::StrCat("layers[", last, "]"),
                        absl::StrCat("output ", out.ToString(),
                                     " is not [batch, classes] (or [batch, ..., classes]) as "
                                     "SPARSE_CATEGORICAL_CROSSENTROPY needs"));
    }
    if (spec.layers(last).has_softmax()) {
      return FieldError(absl::StrCat("layers[", last, "].softmax"),
                        "SPARSE_CATEGORICAL_CROSSENTROPY takes logits; remove the final softmax");
    }
    // One class id per row of logits: [batch] for [batch, classes], [batch, t] for a
    // sequence's [batch, t, classes].
    std::vector<int64_t> label_dims(out.dims().begin(), out.dims().end() - 1);
    label_dims[0] = -1;
    LS_ASSIGN_OR_RETURN(int labels, g.Input("labels", DType::kI64, Shape(label_dims)));
    LS_ASSIGN_OR_RETURN(int loss,
                        g.SparseSoftmaxCrossEntropy(x, labels, spec.label_smoothing(), "loss"));
    LS_RETURN_IF_ERROR(g.SetLoss(loss));
    LS_ASSIGN_OR_RETURN(int accuracy, g.Op(v1::ACCURACY, {x, labels}, "accuracy"));
    g.set_accuracy(accuracy);
  } else {
    LS_ASSIGN_OR_RETURN(int targets, g.Input("labels", dtype, out));
    LS_ASSIGN_OR_RETURN(int loss, g.Op(v1::MEAN_SQUARED_ERROR, {x, targets}, "loss"));
    LS_RETURN_IF_ERROR(g.SetLoss(loss));
  }
  g.set_output(x);
  LS_RETURN_IF_ERROR(g.SetPrecision(spec.precision()));
  return g;
}

absl::StatusOr<v1::ModelSpec> ParseModelSpecJson(absl::string_view json) {
  // Check layer kinds first, so an unknown one is named with its index.
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (doc.is_discarded()) return FieldError("model spec", "is not valid JSON");
  const std::vector<std::string> kinds = BuiltinLayers().names();
  if (doc.is_object() && doc.contains("layers") && doc["layers"].is_array()) {
    for (size_t i = 0; i < doc["layers"].size(); ++i) {
      const nlohmann::json& layer = doc["layers"][i];
      if (!layer.is_object())
        return FieldError(absl::StrCat("layers[", i, "]"), "is not an object");
      for (const auto& item : layer.items()) {
        const std::string key = SnakeCase(item.key());
        if (key == "name" || key == "inputs") continue;
        if (std::find(kinds.begin(), kinds.end(), key) == kinds.end()) {
          return FieldError(absl::StrCat("layers[", i, "]"),
                            absl::StrCat("unknown layer kind \"", item.key(),
                                         "\" (expected one of ", absl::StrJoin(kinds, ", "), ")"));
        }
      }
    }
  }
  v1::ModelSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &spec);
  if (!status.ok()) return FieldError("model spec", std::string(status.message()));
  return spec;
}

absl::StatusOr<v1::OptimizerSpec> ParseOptimizerSpecJson(absl::string_view json) {
  v1::OptimizerSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &spec);
  if (!status.ok()) return FieldError("optimizer spec", std::string(status.message()));
  return spec;
}

}  // namespace lockstep::engine

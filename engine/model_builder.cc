#include "engine/model_builder.h"

#include <optional>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace lockstep::engine {
namespace {

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The most elements a variable or one example's activation may have (2^32: 16 GiB of f32).
// No worker could hold more, and with every count below it the builder's products of sizes
// never overflow int64.
constexpr int64_t kMaxElements = int64_t{1} << 32;

// Elements in `dims`, the batch's -1 left out; nullopt past kMaxElements.
std::optional<int64_t> Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) continue;
    if (d > 0 && n > kMaxElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

absl::Status CheckElements(const std::vector<int64_t>& dims, absl::string_view where,
                           absl::string_view what) {
  if (Elements(dims).has_value()) return absl::OkStatus();
  return Bad(where, absl::StrCat(what, " ", Shape(dims).ToString(),
                                 " has more than 2^32 elements; no worker could hold it"));
}

v1::Initializer OrDefault(const v1::Initializer& init, v1::Initializer::Kind kind) {
  if (init.kind() != v1::Initializer::KIND_UNSPECIFIED) return init;
  v1::Initializer d;
  d.set_kind(kind);
  return d;
}

absl::StatusOr<std::vector<int>> Pair(const google::protobuf::RepeatedField<int32_t>& v,
                                      const std::string& where, int fallback) {
  if (v.empty()) return std::vector<int>{fallback, fallback};
  if (v.size() > 2) return Bad(where, "give [k] or [h, w]");
  for (int x : v) {
    if (x <= 0) return Bad(where, absl::StrCat(x, " must be > 0"));
  }
  return std::vector<int>{v[0], v[v.size() - 1]};
}

const char* KindName(v1::Layer::KindCase k) {
  switch (k) {
    case v1::Layer::kDense:
      return "dense";
    case v1::Layer::kConv2D:
      return "conv2d";
    case v1::Layer::kMaxpool2D:
      return "maxpool2d";
    case v1::Layer::kFlatten:
      return "flatten";
    case v1::Layer::kReshape:
      return "reshape";
    case v1::Layer::kRelu:
      return "relu";
    case v1::Layer::kSigmoid:
      return "sigmoid";
    case v1::Layer::kTanh:
      return "tanh";
    case v1::Layer::kSoftmax:
      return "softmax";
    case v1::Layer::kDropout:
      return "dropout";
    default:
      return "";
  }
}

// Adds layer `i` on top of node `x`; returns the layer's output node.
absl::StatusOr<int> AddLayer(Graph* g, const v1::Layer& layer, int i, int x, DType dtype,
                             const std::string& name) {
  const std::string where = absl::StrCat("layers[", i, "].", KindName(layer.kind_case()));
  const Shape in = g->shape(x);
  switch (layer.kind_case()) {
    case v1::Layer::kDense: {
      const auto& d = layer.dense();
      if (d.units() <= 0) return Bad(where + ".units", absl::StrCat(d.units(), " must be > 0"));
      if (in.rank() != 2) {
        return Bad(where, absl::StrCat("input ", in.ToString(),
                                       " is not [batch, features]; add a flatten layer before it"));
      }
      const int64_t fan_in = in.dim(1);
      LS_RETURN_IF_ERROR(CheckElements({fan_in, d.units()}, where + ".units", "the kernel"));
      LS_ASSIGN_OR_RETURN(
          int w, g->Variable(name + "/kernel", dtype, Shape{fan_in, d.units()},
                             OrDefault(d.kernel_initializer(), v1::Initializer::GLOROT_UNIFORM),
                             fan_in, d.units()));
      LS_ASSIGN_OR_RETURN(int y, g->Op(v1::MATMUL, {x, w}, name + "/matmul"));
      if (d.no_bias()) return y;
      LS_ASSIGN_OR_RETURN(
          int b,
          g->Variable(name + "/bias", dtype, Shape{d.units()},
                      OrDefault(d.bias_initializer(), v1::Initializer::ZEROS), fan_in, d.units()));
      return g->Op(v1::BIAS_ADD, {y, b}, name + "/bias_add");
    }
    case v1::Layer::kConv2D: {
      const auto& c = layer.conv2d();
      if (c.filters() <= 0)
        return Bad(where + ".filters", absl::StrCat(c.filters(), " must be > 0"));
      if (c.kernel_size().empty()) return Bad(where + ".kernel_size", "is required");
      LS_ASSIGN_OR_RETURN(std::vector<int> k, Pair(c.kernel_size(), where + ".kernel_size", 1));
      LS_ASSIGN_OR_RETURN(std::vector<int> s, Pair(c.strides(), where + ".strides", 1));
      if (in.rank() != 4) {
        return Bad(where, absl::StrCat("input ", in.ToString(),
                                       " is not [batch, height, width, channels]; set input_shape "
                                       "to [h, w, c] or add a reshape layer"));
      }
      const int64_t cin = in.dim(3);
      LS_RETURN_IF_ERROR(CheckElements({k[0], k[1], cin, c.filters()}, where, "the kernel"));
      const int64_t fan_in = int64_t{k[0]} * k[1] * cin;
      const int64_t fan_out = int64_t{k[0]} * k[1] * c.filters();
      LS_ASSIGN_OR_RETURN(
          int f, g->Variable(name + "/kernel", dtype, Shape{k[0], k[1], cin, c.filters()},
                             OrDefault(c.kernel_initializer(), v1::Initializer::GLOROT_UNIFORM),
                             fan_in, fan_out));
      v1::Padding padding = c.padding() == v1::PADDING_UNSPECIFIED ? v1::VALID : c.padding();
      absl::StatusOr<int> y = g->Conv2D(x, f, s, padding, name + "/conv");
      if (!y.ok()) return Annotate(y.status(), where);
      if (c.no_bias()) return y;
      LS_ASSIGN_OR_RETURN(
          int b,
          g->Variable(name + "/bias", dtype, Shape{c.filters()},
                      OrDefault(c.bias_initializer(), v1::Initializer::ZEROS), fan_in, fan_out));
      return g->Op(v1::BIAS_ADD, {*y, b}, name + "/bias_add");
    }
    case v1::Layer::kMaxpool2D: {
      const auto& p = layer.maxpool2d();
      LS_ASSIGN_OR_RETURN(std::vector<int> w, Pair(p.pool_size(), where + ".pool_size", 2));
      std::vector<int> s = w;
      if (!p.strides().empty()) {
        LS_ASSIGN_OR_RETURN(s, Pair(p.strides(), where + ".strides", 1));
      }
      if (in.rank() != 4) {
        return Bad(where, absl::StrCat("input ", in.ToString(),
                                       " is not [batch, height, width, channels]"));
      }
      v1::Padding padding = p.padding() == v1::PADDING_UNSPECIFIED ? v1::VALID : p.padding();
      absl::StatusOr<int> y = g->MaxPool2D(x, w, s, padding, name);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kFlatten:
      if (in.rank() < 2)
        return Bad(where, absl::StrCat("input ", in.ToString(), " has no feature axes"));
      return g->Op(v1::FLATTEN, {x}, name);
    case v1::Layer::kReshape: {
      std::vector<int64_t> target = {-1};
      for (int64_t d : layer.reshape().shape()) {
        if (d == 0 || d < -1) return Bad(where + ".shape", absl::StrCat(d, " is not a dimension"));
        target.push_back(d);
      }
      LS_RETURN_IF_ERROR(CheckElements(target, where + ".shape", "the shape"));
      const int64_t known = *Elements(target);
      const int64_t per = *Elements(in.dims());  // every layer's output was checked
      bool has_unknown = std::count(target.begin() + 1, target.end(), -1) > 0;
      if (has_unknown ? per % known != 0 : per != known) {
        return Bad(where + ".shape",
                   absl::StrCat("cannot reshape ", in.ToString(), " to [?,",
                                absl::StrJoin(layer.reshape().shape(), ","), "]"));
      }
      if (has_unknown) {  // resolve the per-example -1 so the batch keeps the -1
        for (size_t j = 1; j < target.size(); ++j) {
          if (target[j] == -1) target[j] = per / known;
        }
      }
      absl::StatusOr<int> y = g->Reshape(x, target);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kRelu:
      return g->Op(v1::RELU, {x}, name);
    case v1::Layer::kSigmoid:
      return g->Op(v1::SIGMOID, {x}, name);
    case v1::Layer::kTanh:
      return g->Op(v1::TANH, {x}, name);
    case v1::Layer::kSoftmax:
      return g->Op(v1::SOFTMAX, {x}, name);
    case v1::Layer::kDropout: {
      float rate = layer.dropout().rate();
      if (!(rate >= 0 && rate < 1))
        return Bad(where + ".rate", absl::StrCat(rate, " is not in [0, 1)"));
      return g->Dropout(x, rate, name);
    }
    default:
      return Bad(absl::StrCat("layers[", i, "]"),
                 "no layer kind set (one of dense, conv2d, maxpool2d, flatten, reshape, relu, "
                 "sigmoid, tanh, softmax, dropout)");
  }
}

}  // namespace

absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec) {
  const DType dtype = spec.f64() ? DType::kF64 : DType::kF32;
  if (spec.input_shape().empty()) return Bad("input_shape", "is required, e.g. [64] or [8, 8, 1]");
  std::vector<int64_t> dims = {-1};
  for (int i = 0; i < spec.input_shape_size(); ++i) {
    if (spec.input_shape(i) <= 0) {
      return Bad(absl::StrCat("input_shape[", i, "]"),
                 absl::StrCat(spec.input_shape(i), " must be > 0"));
    }
    dims.push_back(spec.input_shape(i));
  }
  LS_RETURN_IF_ERROR(CheckElements(dims, "input_shape", "one example"));
  if (spec.layers().empty()) return Bad("layers", "at least one layer is required");
  if (spec.loss() != v1::SPARSE_CATEGORICAL_CROSSENTROPY && spec.loss() != v1::MSE) {
    return Bad("loss", "set SPARSE_CATEGORICAL_CROSSENTROPY or MSE");
  }
  Graph g(spec.seed());
  LS_ASSIGN_OR_RETURN(int x, g.Input("features", dtype, Shape(dims)));
  std::set<std::string> names;
  for (int i = 0; i < spec.layers_size(); ++i) {
    const v1::Layer& layer = spec.layers(i);
    std::string name =
        layer.name().empty() ? absl::StrCat(KindName(layer.kind_case()), "_", i) : layer.name();
    if (!names.insert(name).second) {
      return Bad(absl::StrCat("layers[", i, "].name"),
                 absl::StrCat("\"", name, "\" is used twice"));
    }
    absl::StatusOr<int> y = AddLayer(&g, layer, i, x, dtype, name);
    if (!y.ok()) {
      if (absl::StrContains(y.status().message(), "layers[")) return y.status();
      return Annotate(y.status(), absl::StrCat("layers[", i, "].", KindName(layer.kind_case())));
    }
    LS_RETURN_IF_ERROR(
        CheckElements(g.shape(*y).dims(), absl::StrCat("layers[", i, "]"), "its output"));
    x = *y;
  }
  const Shape out = g.shape(x);
  const int last = spec.layers_size() - 1;
  if (spec.loss() == v1::SPARSE_CATEGORICAL_CROSSENTROPY) {
    if (out.rank() != 2) {
      return Bad(absl::StrCat("layers[", last, "]"),
                 absl::StrCat("output ", out.ToString(),
                              " is not [batch, classes] as "
                              "SPARSE_CATEGORICAL_CROSSENTROPY needs"));
    }
    if (spec.layers(last).has_softmax()) {
      return Bad(absl::StrCat("layers[", last, "].softmax"),
                 "SPARSE_CATEGORICAL_CROSSENTROPY takes logits; remove the final softmax");
    }
    LS_ASSIGN_OR_RETURN(int labels, g.Input("labels", DType::kI64, Shape{-1}));
    LS_ASSIGN_OR_RETURN(int loss, g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {x, labels}, "loss"));
    LS_RETURN_IF_ERROR(g.SetLoss(loss));
    LS_ASSIGN_OR_RETURN(int accuracy, g.Op(v1::ACCURACY, {x, labels}, "accuracy"));
    g.set_accuracy(accuracy);
  } else {
    LS_ASSIGN_OR_RETURN(int targets, g.Input("labels", dtype, out));
    LS_ASSIGN_OR_RETURN(int loss, g.Op(v1::MEAN_SQUARED_ERROR, {x, targets}, "loss"));
    LS_RETURN_IF_ERROR(g.SetLoss(loss));
  }
  g.set_output(x);
  return g;
}

absl::StatusOr<v1::ModelSpec> ParseModelSpecJson(absl::string_view json) {
  // Check layer kinds first, so an unknown one is named with its index.
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (doc.is_discarded()) return Bad("model spec", "is not valid JSON");
  static constexpr const char* kKinds[] = {"dense", "conv2d",  "maxpool2d", "flatten", "reshape",
                                           "relu",  "sigmoid", "tanh",      "softmax", "dropout"};
  if (doc.is_object() && doc.contains("layers") && doc["layers"].is_array()) {
    for (size_t i = 0; i < doc["layers"].size(); ++i) {
      const nlohmann::json& layer = doc["layers"][i];
      if (!layer.is_object()) return Bad(absl::StrCat("layers[", i, "]"), "is not an object");
      for (const auto& item : layer.items()) {
        const std::string& key = item.key();
        if (key == "name") continue;
        bool known = std::find_if(std::begin(kKinds), std::end(kKinds),
                                  [&](const char* k) { return key == k; }) != std::end(kKinds);
        if (!known) {
          return Bad(absl::StrCat("layers[", i, "]"),
                     absl::StrCat("unknown layer kind \"", key, "\" (expected one of ",
                                  absl::StrJoin(kKinds, ", "), ")"));
        }
      }
    }
  }
  v1::ModelSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &spec);
  if (!status.ok()) return Bad("model spec", std::string(status.message()));
  return spec;
}

absl::StatusOr<v1::OptimizerSpec> ParseOptimizerSpecJson(absl::string_view json) {
  v1::OptimizerSpec spec;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &spec);
  if (!status.ok()) return Bad("optimizer spec", std::string(status.message()));
  return spec;
}

}  // namespace lockstep::engine

#include "engine/model_builder.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/ascii.h"
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

// The layer kinds, as JSON keys (Layer's oneof).
constexpr const char* kLayerKinds[] = {
    "dense",
    "conv2d",
    "maxpool2d",
    "flatten",
    "reshape",
    "relu",
    "sigmoid",
    "tanh",
    "softmax",
    "dropout",
    "add",
    "concat",
    "gelu",
    "global_average_pooling",
    "layer_norm",
    "embedding",
    "self_attention",
    "batch_norm",
    "position_embedding",
};

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
    case v1::Layer::kAdd:
      return "add";
    case v1::Layer::kConcat:
      return "concat";
    case v1::Layer::kGelu:
      return "gelu";
    case v1::Layer::kGlobalAveragePooling:
      return "global_average_pooling";
    case v1::Layer::kLayerNorm:
      return "layer_norm";
    case v1::Layer::kEmbedding:
      return "embedding";
    case v1::Layer::kSelfAttention:
      return "self_attention";
    case v1::Layer::kBatchNorm:
      return "batch_norm";
    case v1::Layer::kPositionEmbedding:
      return "position_embedding";
    default:
      return "";
  }
}

// Layers that join several inputs; every other kind takes one.
bool TakesSeveralInputs(v1::Layer::KindCase k) {
  return k == v1::Layer::kAdd || k == v1::Layer::kConcat;
}

// Adds layer `i` on top of nodes `xs` (its inputs, in order; exactly one unless the kind
// takes several); returns the layer's output node.
absl::StatusOr<int> AddLayer(Graph* g, const v1::Layer& layer, int i, const std::vector<int>& xs,
                             DType dtype, const std::string& name) {
  const std::string where = absl::StrCat("layers[", i, "].", KindName(layer.kind_case()));
  const int x = xs[0];
  const Shape in = g->shape(x);
  switch (layer.kind_case()) {
    case v1::Layer::kDense: {
      const auto& d = layer.dense();
      if (d.units() <= 0) return Bad(where + ".units", absl::StrCat(d.units(), " must be > 0"));
      if (in.rank() < 2) {
        return Bad(where, absl::StrCat("input ", in.ToString(), " is not [batch, ..., features]"));
      }
      // Over the last axis (Keras): [b, ..., f] is multiplied as [b * ..., f] rows.
      const int64_t fan_in = in[-1];
      LS_RETURN_IF_ERROR(CheckElements({fan_in, d.units()}, where + ".units", "the kernel"));
      std::vector<int64_t> out_dims = in.dims();
      out_dims.back() = d.units();
      LS_RETURN_IF_ERROR(CheckElements(out_dims, where + ".units", "the output"));
      LS_ASSIGN_OR_RETURN(
          int w, g->Variable(name + "/kernel", dtype, Shape{fan_in, d.units()},
                             OrDefault(d.kernel_initializer(), v1::Initializer::GLOROT_UNIFORM),
                             fan_in, d.units()));
      int rows = x;
      if (in.rank() > 2) {
        LS_ASSIGN_OR_RETURN(rows, g->Reshape(x, {-1, fan_in}));
      }
      LS_ASSIGN_OR_RETURN(int y, g->Op(v1::MATMUL, {rows, w}, name + "/matmul"));
      if (!d.no_bias()) {
        LS_ASSIGN_OR_RETURN(
            int b, g->Variable(name + "/bias", dtype, Shape{d.units()},
                               OrDefault(d.bias_initializer(), v1::Initializer::ZEROS), fan_in,
                               d.units()));
        LS_ASSIGN_OR_RETURN(y, g->Op(v1::BIAS_ADD, {y, b}, name + "/bias_add"));
      }
      if (in.rank() == 2) return y;
      out_dims[0] = -1;
      return g->Reshape(y, out_dims);
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
    case v1::Layer::kAdd: {
      int sum = x;
      for (size_t j = 1; j < xs.size(); ++j) {
        absl::StatusOr<int> y =
            g->Op(v1::ADD, {sum, xs[j]}, j + 1 == xs.size() ? name : absl::StrCat(name, "/", j));
        if (!y.ok()) return Annotate(y.status(), where);
        sum = *y;
      }
      return sum;
    }
    case v1::Layer::kConcat: {
      const int64_t axis = layer.concat().axis() == 0 ? -1 : layer.concat().axis();
      if (axis < -in.rank() || axis >= in.rank()) {
        return Bad(where + ".axis", absl::StrCat(axis, " is out of range for ", in.ToString()));
      }
      absl::StatusOr<int> y = g->Concat(xs, axis < 0 ? axis + in.rank() : axis, name);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kGelu:
      return g->Op(v1::GELU, {x}, name);
    case v1::Layer::kGlobalAveragePooling: {
      if (in.rank() < 3) {
        return Bad(where, absl::StrCat("input ", in.ToString(),
                                       " is not [batch, ..., channels] with axes to pool"));
      }
      std::vector<int64_t> axes;
      for (int a = 1; a + 1 < in.rank(); ++a) axes.push_back(a);
      return g->Mean(x, axes, /*keep_dims=*/false, name);
    }
    case v1::Layer::kLayerNorm: {
      const float eps = layer.layer_norm().epsilon() == 0 ? 1e-3f : layer.layer_norm().epsilon();
      if (!(eps > 0)) return Bad(where + ".epsilon", absl::StrCat(eps, " must be > 0"));
      if (in.rank() < 2) {
        return Bad(where, absl::StrCat("input ", in.ToString(), " has no feature axis"));
      }
      const int64_t c = in[-1];
      v1::Initializer ones;
      ones.set_kind(v1::Initializer::CONSTANT);
      ones.set_value(1);
      LS_ASSIGN_OR_RETURN(int gamma, g->Variable(name + "/gamma", dtype, Shape{c}, ones, c, c));
      LS_ASSIGN_OR_RETURN(int beta, g->Variable(name + "/beta", dtype, Shape{c},
                                                OrDefault({}, v1::Initializer::ZEROS), c, c));
      absl::StatusOr<int> y = g->LayerNorm(x, gamma, beta, eps, name);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kBatchNorm: {
      const auto& b = layer.batch_norm();
      const float eps = b.epsilon() == 0 ? 1e-3f : b.epsilon();
      const float momentum = b.momentum() == 0 ? 0.99f : b.momentum();
      if (!(eps > 0)) return Bad(where + ".epsilon", absl::StrCat(eps, " must be > 0"));
      if (!(momentum > 0 && momentum < 1)) {
        return Bad(where + ".momentum", absl::StrCat(momentum, " is not in (0, 1)"));
      }
      if (in.rank() < 2) {
        return Bad(where, absl::StrCat("input ", in.ToString(), " has no channel axis"));
      }
      if (layer.batch_norm().virtual_batch_size() < 0) {
        return Bad(where + ".virtual_batch_size",
                   absl::StrCat(layer.batch_norm().virtual_batch_size(), " must be >= 0"));
      }
      if (b.synchronized() && b.virtual_batch_size() > 0) {
        return Bad(where + ".synchronized",
                   "statistics over the global batch exclude virtual_batch_size groups");
      }
      if (b.synchronized() && b.virtual_batch_size() > 0) {
        return Bad(where + ".synchronized",
                   "statistics over the global batch exclude virtual_batch_size groups");
      }
      const int64_t c = in[-1];
      v1::Initializer ones;
      ones.set_kind(v1::Initializer::CONSTANT);
      ones.set_value(1);
      const v1::Initializer zeros = OrDefault({}, v1::Initializer::ZEROS);
      std::vector<int> xs = {x};
      for (const auto& [suffix, init, trainable] :
           {std::tuple{"/gamma", ones, true}, std::tuple{"/beta", zeros, true},
            std::tuple{"/moving_mean", zeros, false},
            std::tuple{"/moving_variance", ones, false}}) {
        LS_ASSIGN_OR_RETURN(int v,
                            g->Variable(name + suffix, dtype, Shape{c}, init, c, c, trainable));
        xs.push_back(v);
      }
      absl::StatusOr<int> y =
          g->BatchNorm(xs, momentum, eps, name, b.virtual_batch_size(), b.synchronized());
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kEmbedding: {
      const auto& e = layer.embedding();
      if (e.input_dim() <= 0) {
        return Bad(where + ".input_dim", absl::StrCat(e.input_dim(), " must be > 0"));
      }
      if (e.output_dim() <= 0) {
        return Bad(where + ".output_dim", absl::StrCat(e.output_dim(), " must be > 0"));
      }
      LS_RETURN_IF_ERROR(
          CheckElements({e.input_dim(), e.output_dim()}, where + ".input_dim", "the table"));
      std::vector<int64_t> out = in.dims();
      out.push_back(e.output_dim());
      LS_RETURN_IF_ERROR(CheckElements(out, where + ".output_dim", "the output"));
      LS_ASSIGN_OR_RETURN(
          int table,
          g->Variable(name + "/embeddings", dtype, Shape{e.input_dim(), e.output_dim()},
                      OrDefault(e.embeddings_initializer(), v1::Initializer::GLOROT_UNIFORM),
                      e.input_dim(), e.output_dim()));
      absl::StatusOr<int> y = g->Op(v1::EMBEDDING, {x, table}, name);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kPositionEmbedding: {
      if (in.rank() != 3 || in.dim(1) < 1 || in.dim(2) < 1) {
        return Bad(where, absl::StrCat("input ", in.ToString(), " is not [batch, time, features]"));
      }
      LS_ASSIGN_OR_RETURN(int table,
                          g->Variable(name + "/embeddings", dtype, Shape{in.dim(1), in.dim(2)},
                                      OrDefault(layer.position_embedding().embeddings_initializer(),
                                                v1::Initializer::GLOROT_UNIFORM),
                                      in.dim(1), in.dim(2)));
      absl::StatusOr<int> y = g->Op(v1::BIAS_ADD, {x, table}, name);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    case v1::Layer::kSelfAttention: {
      const auto& a = layer.self_attention();
      if (in.rank() != 3) {
        return Bad(where, absl::StrCat("input ", in.ToString(), " is not [batch, time, features]"));
      }
      const int64_t d = in.dim(2);
      if (a.num_heads() <= 0 || d % a.num_heads() != 0) {
        return Bad(where + ".num_heads",
                   absl::StrCat(a.num_heads(), " does not divide the feature size ", d));
      }
      LS_RETURN_IF_ERROR(CheckElements({d, 3 * d}, where, "the weights"));
      v1::Initializer glorot = OrDefault({}, v1::Initializer::GLOROT_UNIFORM);
      LS_ASSIGN_OR_RETURN(int w_qkv,
                          g->Variable(name + "/qkv", dtype, Shape{d, 3 * d}, glorot, d, 3 * d));
      LS_ASSIGN_OR_RETURN(int w_o, g->Variable(name + "/output", dtype, Shape{d, d}, glorot, d, d));
      absl::StatusOr<int> y = g->SelfAttention(x, w_qkv, w_o, a.num_heads(), a.causal(), name);
      if (!y.ok()) return Annotate(y.status(), where);
      return y;
    }
    default:
      return Bad(absl::StrCat("layers[", i, "]"),
                 absl::StrCat("no layer kind set (one of ", absl::StrJoin(kLayerKinds, ", "), ")"));
  }
}

// The nodes layer `i` takes: those its `inputs` name (earlier layers or model inputs), or
// `previous` when it names none.
absl::StatusOr<std::vector<int>> LayerInputs(const v1::Layer& layer, int i,
                                             const std::map<std::string, int>& outputs,
                                             int previous) {
  const std::string where = absl::StrCat("layers[", i, "].inputs");
  std::vector<int> xs;
  for (int j = 0; j < layer.inputs_size(); ++j) {
    auto it = outputs.find(layer.inputs(j));
    if (it == outputs.end()) {
      return Bad(absl::StrCat(where, "[", j, "]"),
                 absl::StrCat("no layer or model input named '", layer.inputs(j),
                              "' before it (layers take earlier layers' outputs)"));
    }
    xs.push_back(it->second);
  }
  if (xs.empty()) xs.push_back(previous);
  const char* kind = KindName(layer.kind_case());
  if (TakesSeveralInputs(layer.kind_case())) {
    if (layer.inputs_size() < 2) {
      return Bad(where, absl::StrCat(kind,
                                     " joins two or more inputs; name them, e.g. "
                                     "\"inputs\": [\"a\", \"b\"]"));
    }
  } else if (xs.size() != 1 && layer.kind_case() != v1::Layer::KIND_NOT_SET) {
    return Bad(where, absl::StrCat(kind, " takes one input, got ", xs.size()));
  }
  return xs;
}

// Adds the model's inputs to `g` (one "features" from input_shape, or the named `inputs`)
// and returns them by name, in order.
absl::StatusOr<std::vector<std::pair<std::string, int>>> AddModelInputs(const v1::ModelSpec& spec,
                                                                        DType dtype, Graph* g) {
  if (spec.input_shape().empty() == spec.inputs().empty()) {
    return Bad("input_shape", spec.inputs().empty()
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
      return Bad(where + ".name", "give each input a name other than \"labels\"");
    }
    if (in.shape().empty()) return Bad(shape_where, "is required, e.g. [64] or [8, 8, 1]");
    std::vector<int64_t> dims = {-1};
    for (int i = 0; i < in.shape_size(); ++i) {
      if (in.shape(i) <= 0) {
        return Bad(absl::StrCat(shape_where, "[", i, "]"),
                   absl::StrCat(in.shape(i), " must be > 0"));
      }
      dims.push_back(in.shape(i));
    }
    LS_RETURN_IF_ERROR(CheckElements(dims, shape_where, "one example"));
    for (const auto& [name, node] : nodes) {
      if (name == in.name()) {
        return Bad(where + ".name", absl::StrCat("\"", name, "\" is used twice"));
      }
    }
    LS_ASSIGN_OR_RETURN(int x, g->Input(in.name(), dtype, Shape(dims)));
    nodes.emplace_back(in.name(), x);
  }
  return nodes;
}

}  // namespace

absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec) {
  const DType dtype = spec.f64() ? DType::kF64 : DType::kF32;
  Graph g(spec.seed());
  LS_ASSIGN_OR_RETURN(auto inputs, AddModelInputs(spec, dtype, &g));
  if (spec.layers().empty()) return Bad("layers", "at least one layer is required");
  if (spec.loss() != v1::SPARSE_CATEGORICAL_CROSSENTROPY && spec.loss() != v1::MSE) {
    return Bad("loss", "set SPARSE_CATEGORICAL_CROSSENTROPY or MSE");
  }
  // Every name a layer may take as an input: model inputs, then layers as they are added.
  std::map<std::string, int> outputs(inputs.begin(), inputs.end());
  int x = inputs[0].second;
  for (int i = 0; i < spec.layers_size(); ++i) {
    const v1::Layer& layer = spec.layers(i);
    std::string name =
        layer.name().empty() ? absl::StrCat(KindName(layer.kind_case()), "_", i) : layer.name();
    if (outputs.count(name) > 0) {
      return Bad(absl::StrCat("layers[", i, "].name"),
                 absl::StrCat("\"", name, "\" is used twice"));
    }
    LS_ASSIGN_OR_RETURN(std::vector<int> xs, LayerInputs(layer, i, outputs, x));
    absl::StatusOr<int> y = AddLayer(&g, layer, i, xs, dtype, name);
    if (!y.ok()) {
      if (absl::StrContains(y.status().message(), "layers[")) return y.status();
      return Annotate(y.status(), absl::StrCat("layers[", i, "].", KindName(layer.kind_case())));
    }
    LS_RETURN_IF_ERROR(
        CheckElements(g.shape(*y).dims(), absl::StrCat("layers[", i, "]"), "its output"));
    x = *y;
    outputs[name] = x;
  }
  const Shape out = g.shape(x);
  const int last = spec.layers_size() - 1;
  if (!(spec.label_smoothing() >= 0 && spec.label_smoothing() <= 1)) {
    return Bad("label_smoothing", absl::StrCat(spec.label_smoothing(), " is not in [0, 1]"));
  }
  if (spec.label_smoothing() != 0 && spec.loss() != v1::SPARSE_CATEGORICAL_CROSSENTROPY) {
    return Bad("label_smoothing", "only for loss SPARSE_CATEGORICAL_CROSSENTROPY");
  }
  if (spec.loss() == v1::SPARSE_CATEGORICAL_CROSSENTROPY) {
    if (out.rank() < 2) {
      return Bad(absl::StrCat("layers[", last, "]"),
                 absl::StrCat("output ", out.ToString(),
                              " is not [batch, classes] (or [batch, ..., classes]) as "
                              "SPARSE_CATEGORICAL_CROSSENTROPY needs"));
    }
    if (spec.layers(last).has_softmax()) {
      return Bad(absl::StrCat("layers[", last, "].softmax"),
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
  if (doc.is_discarded()) return Bad("model spec", "is not valid JSON");
  const auto& kKinds = kLayerKinds;
  if (doc.is_object() && doc.contains("layers") && doc["layers"].is_array()) {
    for (size_t i = 0; i < doc["layers"].size(); ++i) {
      const nlohmann::json& layer = doc["layers"][i];
      if (!layer.is_object()) return Bad(absl::StrCat("layers[", i, "]"), "is not an object");
      for (const auto& item : layer.items()) {
        const std::string key = SnakeCase(item.key());
        if (key == "name" || key == "inputs") continue;
        bool known = std::find_if(std::begin(kKinds), std::end(kKinds),
                                  [&](const char* k) { return key == k; }) != std::end(kKinds);
        if (!known) {
          return Bad(absl::StrCat("layers[", i, "]"),
                     absl::StrCat("unknown layer kind \"", item.key(), "\" (expected one of ",
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

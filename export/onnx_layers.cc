// How each layer kind becomes ONNX nodes (opset 17). One function per kind, registered in
// BuiltinOnnxLayers() at the bottom; DESIGN.md's export table follows this file.
//   dense      MatMul(x, kernel) then Add(bias) unless no_bias (any rank: the last axis)
//   relu, sigmoid, tanh      Relu, Sigmoid, Tanh
//   softmax    Softmax(axis=-1)
//   flatten    Flatten(axis=1): [batch, ...] -> [batch, product]
//   reshape    Reshape(x, [0, shape...]): 0 keeps the batch dimension
//   dropout    nothing: inference is the identity
//   conv2d     NHWC -> Transpose to NCHW, Conv (kernel HWIO transposed to OIHW in the graph,
//              SAME as the engine's explicit pads: the extra one after), Transpose back,
//              then Add(bias) unless no_bias
//   maxpool2d  the same transposes around MaxPool (SAME pads never win the max)
//   batch_norm inference with the moving statistics, as the engine computes it:
//              gamma * ((x - moving_mean) * Reciprocal(Sqrt(moving_variance + eps))) + beta
//   layer_norm LayerNormalization(axis=-1, epsilon), gamma and beta as its scale and bias
//   gelu       exact, as the engine: x * 0.5 * (1 + Erf(x / sqrt(2)))
//   global_average_pooling  ReduceMean over every axis but batch and channels (keepdims 0)
//   embedding  Gather(table, Cast<int64>(ids), axis 0): ids arrive as the features' floats
//   position_embedding      Add(x, table [t, d])
//   self_attention  MatMul(x, qkv) Split in Q, K, V; each Reshape [b, t, heads, k] and
//              Transpose to [b, heads, t, k] (K to [b, heads, k, t]); MatMul, Mul by
//              1/sqrt(k), Add of the causal mask (a constant [t, t]: 0 on and below the
//              diagonal, -inf above) when causal, Softmax(-1), MatMul V, Transpose and Reshape
//              back to [b, t, d], MatMul(output)
//   add        Add of the inputs, left to right; concat  Concat(axis) (default -1)
// A kind with no entry (none today: onnx_test checks every Layer.kind) is refused naming it.
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "export/onnx_graph.h"

namespace lockstep::exporting {
namespace {

absl::Status Refuse(const OnnxLayerContext& c, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("layers[", c.index, "] (",
                                                 LayerKindName(c.layer->kind_case()), " \"", c.name,
                                                 "\"): ", what));
}

absl::StatusOr<OnnxValue> Dense(const OnnxLayerContext& c, OnnxGraph& g) {
  auto kernel = c.Variable("kernel");
  if (!kernel.ok()) return kernel.status();
  const auto& kdims = (*kernel)->tensor().shape().dims();
  if (kdims.size() != 2 || c.input.dims.empty() || kdims[0] != c.input.dims.back()) {
    return Refuse(c, absl::StrCat("the kernel's shape does not take the input's last axis (",
                                  c.input.dims.empty() ? 0 : c.input.dims.back(), ")"));
  }
  auto k = g.AddVariable(**kernel);
  if (!k.ok()) return k.status();
  OnnxValue out{c.name + "/matmul", c.input.dims};
  out.dims.back() = kdims[1];
  g.AddNode("MatMul", {c.input.name, *k}, out.name);
  if (c.layer->dense().no_bias()) return out;
  auto bias = c.Variable("bias");
  if (!bias.ok()) return bias.status();
  auto b = g.AddVariable(**bias);
  if (!b.ok()) return b.status();
  g.AddNode("Add", {out.name, *b}, c.name);
  out.name = c.name;
  return out;
}

// An elementwise activation: one node of `op`, the shape unchanged.
OnnxLayerFn Elementwise(const std::string& op) {
  return [op](const OnnxLayerContext& c, OnnxGraph& g) -> absl::StatusOr<OnnxValue> {
    g.AddNode(op, {c.input.name}, c.name);
    return OnnxValue{c.name, c.input.dims};
  };
}

void SetAxis(int64_t value, onnx::NodeProto* node) { SetAttribute("axis", value, node); }

absl::StatusOr<OnnxValue> Softmax(const OnnxLayerContext& c, OnnxGraph& g) {
  SetAxis(-1, g.AddNode("Softmax", {c.input.name}, c.name));
  return OnnxValue{c.name, c.input.dims};
}

absl::StatusOr<OnnxValue> Flatten(const OnnxLayerContext& c, OnnxGraph& g) {
  SetAxis(1, g.AddNode("Flatten", {c.input.name}, c.name));
  const int64_t n = std::accumulate(c.input.dims.begin(), c.input.dims.end(), int64_t{1},
                                    std::multiplies<int64_t>());
  return OnnxValue{c.name, {n}};
}

absl::StatusOr<OnnxValue> Reshape(const OnnxLayerContext& c, OnnxGraph& g) {
  std::vector<int64_t> shape = {0};
  std::vector<int64_t> dims;
  int64_t known = 1;
  int unknown = -1;
  for (int64_t d : c.layer->reshape().shape()) {
    shape.push_back(d);
    if (d == -1) unknown = static_cast<int>(dims.size());
    if (d != -1) known *= d;
    dims.push_back(d);
  }
  if (unknown >= 0) {
    const int64_t n = std::accumulate(c.input.dims.begin(), c.input.dims.end(), int64_t{1},
                                      std::multiplies<int64_t>());
    if (known == 0) return Refuse(c, "a -1 beside a 0 in the shape");
    dims[unknown] = n / known;
  }
  const std::string target = g.AddInt64s(c.name + "/shape", shape);
  g.AddNode("Reshape", {c.input.name, target}, c.name);
  return OnnxValue{c.name, dims};
}

absl::StatusOr<OnnxValue> Dropout(const OnnxLayerContext& c, OnnxGraph&) { return c.input; }

// The variable "<name>/<suffix>" as an initializer, checked to be [n].
absl::StatusOr<std::string> Vector(const OnnxLayerContext& c, OnnxGraph& g,
                                   const std::string& suffix, int64_t n) {
  auto v = c.Variable(suffix);
  if (!v.ok()) return v.status();
  const auto& dims = (*v)->tensor().shape().dims();
  if (dims.size() != 1 || dims[0] != n) {
    return Refuse(c, absl::StrCat((*v)->name(), " is not [", n, "] as the input's last axis"));
  }
  return g.AddVariable(**v);
}

// [h, w] of a window field: empty -> fallback, [k] -> [k, k] (the model builder's Pair).
std::vector<int64_t> Pair(const google::protobuf::RepeatedField<int32_t>& v, int64_t fallback) {
  if (v.empty()) return {fallback, fallback};
  return {v[0], v[v.size() - 1]};
}

// The engine's window geometry (engine/shape_inference.cc): output size and ONNX pads
// [top, left, bottom, right] of an NHWC input's spatial dims.
struct Window {
  std::vector<int64_t> out, pads;
};
absl::StatusOr<Window> MakeWindow(const OnnxLayerContext& c, const std::vector<int64_t>& k,
                                  const std::vector<int64_t>& s, v1::Padding padding) {
  Window w;
  w.pads.assign(4, 0);
  for (int a = 0; a < 2; ++a) {
    const int64_t in = c.input.dims[a];
    if (padding == v1::SAME) {
      const int64_t out = (in + s[a] - 1) / s[a];
      const int64_t total = std::max<int64_t>(0, (out - 1) * s[a] + k[a] - in);
      w.out.push_back(out);
      w.pads[a] = total / 2;
      w.pads[a + 2] = total - total / 2;
    } else {
      if (in < k[a]) return Refuse(c, "the window does not fit the input with VALID padding");
      w.out.push_back((in - k[a]) / s[a] + 1);
    }
  }
  return w;
}

// `op` (Conv or MaxPool) over NHWC `c.input` through NCHW transposes; returns [b, oh, ow, ch].
OnnxValue Windowed(const OnnxLayerContext& c, OnnxGraph& g, const std::string& op,
                   const std::vector<std::string>& extra_inputs, const std::vector<int64_t>& k,
                   const std::vector<int64_t>& s, const Window& w, int64_t channels) {
  g.AddTranspose(c.input.name, {0, 3, 1, 2}, c.name + "/nchw");
  std::vector<std::string> inputs = {c.name + "/nchw"};
  inputs.insert(inputs.end(), extra_inputs.begin(), extra_inputs.end());
  onnx::NodeProto* node = g.AddNode(op, inputs, c.name + "/" + absl::AsciiStrToLower(op));
  SetAttribute("kernel_shape", k, node);
  SetAttribute("strides", s, node);
  SetAttribute("pads", w.pads, node);
  g.AddTranspose(node->name(), {0, 2, 3, 1}, c.name + "/nhwc");
  return OnnxValue{c.name + "/nhwc", {w.out[0], w.out[1], channels}};
}

absl::StatusOr<OnnxValue> Conv2D(const OnnxLayerContext& c, OnnxGraph& g) {
  const v1::Conv2DLayer& conv = c.layer->conv2d();
  if (c.input.dims.size() != 3) return Refuse(c, "the input is not [batch, h, w, channels]");
  auto kernel = c.Variable("kernel");
  if (!kernel.ok()) return kernel.status();
  const auto& kd = (*kernel)->tensor().shape().dims();
  if (kd.size() != 4 || kd[2] != c.input.dims[2]) {
    return Refuse(c, "the kernel is not [h, w, in_channels, filters] for the input");
  }
  auto k = g.AddVariable(**kernel);
  if (!k.ok()) return k.status();
  const std::vector<int64_t> window = {kd[0], kd[1]};
  const std::vector<int64_t> strides = Pair(conv.strides(), 1);
  auto w = MakeWindow(c, window, strides,
                      conv.padding() == v1::PADDING_UNSPECIFIED ? v1::VALID : conv.padding());
  if (!w.ok()) return w.status();
  g.AddTranspose(*k, {3, 2, 0, 1}, c.name + "/kernel_oihw");
  OnnxValue out = Windowed(c, g, "Conv", {c.name + "/kernel_oihw"}, window, strides, *w, kd[3]);
  if (conv.no_bias()) return out;
  auto b = Vector(c, g, "bias", kd[3]);
  if (!b.ok()) return b.status();
  g.AddNode("Add", {out.name, *b}, c.name);
  out.name = c.name;
  return out;
}

absl::StatusOr<OnnxValue> MaxPool2D(const OnnxLayerContext& c, OnnxGraph& g) {
  const v1::MaxPool2DLayer& pool = c.layer->maxpool2d();
  if (c.input.dims.size() != 3) return Refuse(c, "the input is not [batch, h, w, channels]");
  const std::vector<int64_t> window = Pair(pool.pool_size(), 2);
  const std::vector<int64_t> strides = pool.strides().empty() ? window : Pair(pool.strides(), 1);
  auto w = MakeWindow(c, window, strides,
                      pool.padding() == v1::PADDING_UNSPECIFIED ? v1::VALID : pool.padding());
  if (!w.ok()) return w.status();
  return Windowed(c, g, "MaxPool", {}, window, strides, *w, c.input.dims[2]);
}

absl::StatusOr<OnnxValue> BatchNorm(const OnnxLayerContext& c, OnnxGraph& g) {
  if (c.input.dims.empty()) return Refuse(c, "the input has no channel axis");
  const int64_t ch = c.input.dims.back();
  const float eps = c.layer->batch_norm().epsilon() == 0 ? 1e-3f : c.layer->batch_norm().epsilon();
  std::string v[4];
  const char* suffixes[] = {"gamma", "beta", "moving_mean", "moving_variance"};
  for (int i = 0; i < 4; ++i) {
    auto added = Vector(c, g, suffixes[i], ch);
    if (!added.ok()) return added.status();
    v[i] = *added;
  }
  const std::string n = c.name;
  g.AddNode("Add", {v[3], g.AddFloats(n + "/epsilon", {}, {eps})}, n + "/variance_eps");
  g.AddNode("Sqrt", {n + "/variance_eps"}, n + "/std");
  g.AddNode("Reciprocal", {n + "/std"}, n + "/rstd");
  g.AddNode("Sub", {c.input.name, v[2]}, n + "/centered");
  g.AddNode("Mul", {n + "/centered", n + "/rstd"}, n + "/normalized");
  g.AddNode("Mul", {v[0], n + "/normalized"}, n + "/scaled");
  g.AddNode("Add", {n + "/scaled", v[1]}, n);
  return OnnxValue{n, c.input.dims};
}

absl::StatusOr<OnnxValue> LayerNorm(const OnnxLayerContext& c, OnnxGraph& g) {
  if (c.input.dims.empty()) return Refuse(c, "the input has no feature axis");
  const float eps = c.layer->layer_norm().epsilon() == 0 ? 1e-3f : c.layer->layer_norm().epsilon();
  auto gamma = Vector(c, g, "gamma", c.input.dims.back());
  if (!gamma.ok()) return gamma.status();
  auto beta = Vector(c, g, "beta", c.input.dims.back());
  if (!beta.ok()) return beta.status();
  onnx::NodeProto* node = g.AddNode("LayerNormalization", {c.input.name, *gamma, *beta}, c.name);
  SetAxis(-1, node);
  SetAttribute("epsilon", eps, node);
  return OnnxValue{c.name, c.input.dims};
}

absl::StatusOr<OnnxValue> Gelu(const OnnxLayerContext& c, OnnxGraph& g) {
  const std::string n = c.name;
  g.AddNode("Div", {c.input.name, g.AddFloats(n + "/sqrt2", {}, {std::sqrt(2.0f)})}, n + "/z");
  g.AddNode("Erf", {n + "/z"}, n + "/erf");
  g.AddNode("Add", {n + "/erf", g.AddFloats(n + "/one", {}, {1.0f})}, n + "/one_plus");
  g.AddNode("Mul", {n + "/one_plus", g.AddFloats(n + "/half", {}, {0.5f})}, n + "/phi");
  g.AddNode("Mul", {c.input.name, n + "/phi"}, n);
  return OnnxValue{n, c.input.dims};
}

absl::StatusOr<OnnxValue> GlobalAveragePooling(const OnnxLayerContext& c, OnnxGraph& g) {
  if (c.input.dims.size() < 2) return Refuse(c, "the input has no axes to pool");
  std::vector<int64_t> axes;
  for (size_t a = 1; a < c.input.dims.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  onnx::NodeProto* node = g.AddNode("ReduceMean", {c.input.name}, c.name);
  SetAttribute("axes", axes, node);
  SetAttribute("keepdims", int64_t{0}, node);
  return OnnxValue{c.name, {c.input.dims.back()}};
}

absl::StatusOr<OnnxValue> Embedding(const OnnxLayerContext& c, OnnxGraph& g) {
  auto table = c.Variable("embeddings");
  if (!table.ok()) return table.status();
  const auto& td = (*table)->tensor().shape().dims();
  if (td.size() != 2) return Refuse(c, "the table is not [input_dim, output_dim]");
  auto t = g.AddVariable(**table);
  if (!t.ok()) return t.status();
  SetAttribute("to", int64_t{onnx::TensorProto::INT64},
               g.AddNode("Cast", {c.input.name}, c.name + "/ids"));
  SetAxis(0, g.AddNode("Gather", {*t, c.name + "/ids"}, c.name));
  OnnxValue out{c.name, c.input.dims};
  out.dims.push_back(td[1]);
  return out;
}

absl::StatusOr<OnnxValue> PositionEmbedding(const OnnxLayerContext& c, OnnxGraph& g) {
  auto table = c.Variable("embeddings");
  if (!table.ok()) return table.status();
  const auto& td = (*table)->tensor().shape().dims();
  if (c.input.dims.size() != 2 || td.size() != 2 || td[0] != c.input.dims[0] ||
      td[1] != c.input.dims[1]) {
    return Refuse(c, "the table is not [time, features] of the input");
  }
  auto t = g.AddVariable(**table);
  if (!t.ok()) return t.status();
  g.AddNode("Add", {c.input.name, *t}, c.name);
  return OnnxValue{c.name, c.input.dims};
}

absl::StatusOr<OnnxValue> SelfAttention(const OnnxLayerContext& c, OnnxGraph& g) {
  if (c.input.dims.size() != 2) return Refuse(c, "the input is not [batch, time, features]");
  const int64_t t = c.input.dims[0], d = c.input.dims[1];
  const int64_t heads = c.layer->self_attention().num_heads();
  if (heads <= 0 || d % heads != 0) return Refuse(c, "num_heads does not divide the features");
  const int64_t k = d / heads;
  auto qkv = c.Variable("qkv");
  if (!qkv.ok()) return qkv.status();
  auto wo = c.Variable("output");
  if (!wo.ok()) return wo.status();
  const auto& qd = (*qkv)->tensor().shape().dims();
  const auto& od = (*wo)->tensor().shape().dims();
  if (qd.size() != 2 || qd[0] != d || qd[1] != 3 * d || od.size() != 2 || od[0] != d ||
      od[1] != d) {
    return Refuse(c, absl::StrCat("the weights are not qkv [", d, ", ", 3 * d, "] and output [", d,
                                  ", ", d, "]"));
  }
  auto wqkv = g.AddVariable(**qkv);
  if (!wqkv.ok()) return wqkv.status();
  auto wout = g.AddVariable(**wo);
  if (!wout.ok()) return wout.status();
  const std::string n = c.name;
  g.AddNode("MatMul", {c.input.name, *wqkv}, n + "/qkv_proj");
  onnx::NodeProto* split = g.AddNode("Split", {n + "/qkv_proj"}, n + "/split");
  SetAxis(-1, split);
  split->clear_output();
  const std::string heads_shape = g.AddInt64s(n + "/heads_shape", {0, 0, heads, k});
  for (const char* part : {"q", "k", "v"}) {
    split->add_output(absl::StrCat(n, "/", part));
    g.AddNode("Reshape", {absl::StrCat(n, "/", part), heads_shape},
              absl::StrCat(n, "/", part, "_heads"));
    g.AddTranspose(
        absl::StrCat(n, "/", part, "_heads"),
        part[0] == 'k' ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3},
        absl::StrCat(n, "/", part, "_t"));
  }
  g.AddNode("MatMul", {n + "/q_t", n + "/k_t"}, n + "/qk");
  g.AddNode("Mul", {n + "/qk", g.AddFloats(n + "/scale", {}, {1.0f / std::sqrt(float(k))})},
            n + "/scores");
  std::string scores = n + "/scores";
  if (c.layer->self_attention().causal()) {
    std::vector<float> mask(t * t, 0.0f);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = i + 1; j < t; ++j) mask[i * t + j] = -std::numeric_limits<float>::infinity();
    }
    g.AddNode("Add", {scores, g.AddFloats(n + "/causal_mask", {t, t}, mask)}, n + "/masked");
    scores = n + "/masked";
  }
  SetAxis(-1, g.AddNode("Softmax", {scores}, n + "/weights"));
  g.AddNode("MatMul", {n + "/weights", n + "/v_t"}, n + "/heads");
  g.AddTranspose(n + "/heads", {0, 2, 1, 3}, n + "/heads_t");
  g.AddNode("Reshape", {n + "/heads_t", g.AddInt64s(n + "/rows_shape", {0, 0, d})},
            n + "/concat_heads");
  g.AddNode("MatMul", {n + "/concat_heads", *wout}, n);
  return OnnxValue{n, c.input.dims};
}

absl::StatusOr<OnnxValue> Add(const OnnxLayerContext& c, OnnxGraph& g) {
  if (c.inputs.size() < 2) return Refuse(c, "add joins two or more inputs");
  std::string sum = c.inputs[0].name;
  for (size_t j = 1; j < c.inputs.size(); ++j) {
    if (c.inputs[j].dims != c.input.dims) return Refuse(c, "the inputs' shapes differ");
    const std::string out = j + 1 == c.inputs.size() ? c.name : absl::StrCat(c.name, "/", j);
    g.AddNode("Add", {sum, c.inputs[j].name}, out);
    sum = out;
  }
  return OnnxValue{c.name, c.input.dims};
}

absl::StatusOr<OnnxValue> Concat(const OnnxLayerContext& c, OnnxGraph& g) {
  const int64_t rank = static_cast<int64_t>(c.input.dims.size()) + 1;  // with the batch
  int64_t axis = c.layer->concat().axis() == 0 ? -1 : c.layer->concat().axis();
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank) return Refuse(c, "the axis is out of range or the batch axis");
  std::vector<std::string> names;
  OnnxValue out{c.name, c.input.dims};
  out.dims[axis - 1] = 0;
  for (const OnnxValue& v : c.inputs) {
    if (v.dims.size() != c.input.dims.size()) return Refuse(c, "the inputs' ranks differ");
    names.push_back(v.name);
    out.dims[axis - 1] += v.dims[axis - 1];
  }
  SetAxis(axis, g.AddNode("Concat", names, c.name));
  return out;
}

}  // namespace

absl::StatusOr<OnnxLayerRegistry> BuiltinOnnxLayers() {
  OnnxLayerRegistry r;
  const std::pair<v1::Layer::KindCase, OnnxLayerFn> kinds[] = {
      {v1::Layer::kDense, Dense},
      {v1::Layer::kRelu, Elementwise("Relu")},
      {v1::Layer::kSigmoid, Elementwise("Sigmoid")},
      {v1::Layer::kTanh, Elementwise("Tanh")},
      {v1::Layer::kSoftmax, Softmax},
      {v1::Layer::kFlatten, Flatten},
      {v1::Layer::kReshape, Reshape},
      {v1::Layer::kDropout, Dropout},
      {v1::Layer::kConv2D, Conv2D},
      {v1::Layer::kMaxpool2D, MaxPool2D},
      {v1::Layer::kBatchNorm, BatchNorm},
      {v1::Layer::kLayerNorm, LayerNorm},
      {v1::Layer::kGelu, Gelu},
      {v1::Layer::kGlobalAveragePooling, GlobalAveragePooling},
      {v1::Layer::kEmbedding, Embedding},
      {v1::Layer::kPositionEmbedding, PositionEmbedding},
      {v1::Layer::kSelfAttention, SelfAttention},
      {v1::Layer::kAdd, Add},
      {v1::Layer::kConcat, Concat},
  };
  for (const auto& [kind, fn] : kinds) {
    if (absl::Status s = r.Register(kind, fn); !s.ok()) return s;
  }
  return r;
}

}  // namespace lockstep::exporting

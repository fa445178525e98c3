// How each layer kind becomes ONNX nodes (opset 17). One function per kind, registered in
// BuiltinOnnxLayers() at the bottom; DESIGN.md's export table follows this file.
//   dense      MatMul(x, kernel) then Add(bias) unless no_bias (any rank: the last axis)
//   relu, sigmoid, tanh      Relu, Sigmoid, Tanh
//   softmax    Softmax(axis=-1)
//   flatten    Flatten(axis=1): [batch, ...] -> [batch, product]
//   reshape    Reshape(x, [0, shape...]): 0 keeps the batch dimension
//   dropout    nothing: inference is the identity
// Every other kind is refused naming it.
#include <numeric>

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

// Adds the INT attribute "axis" = `value` to `node`.
void SetAxis(int64_t value, onnx::NodeProto* node) {
  onnx::AttributeProto* axis = node->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(value);
}

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
  };
  for (const auto& [kind, fn] : kinds) {
    if (absl::Status s = r.Register(kind, fn); !s.ok()) return s;
  }
  return r;
}

}  // namespace lockstep::exporting

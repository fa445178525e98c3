#include "engine/graph.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/ops/builtin_ops.h"

namespace lockstep::engine {
namespace {

// A node of `op` on `inputs`, named `name`; the caller sets the op's attributes.
v1::NodeDef NewNode(v1::OpType op, const std::vector<int>& inputs, absl::string_view name) {
  v1::NodeDef n;
  n.set_op(op);
  n.set_name(std::string(name));
  for (int in : inputs) n.add_inputs(in);
  return n;
}

}  // namespace

Graph::Graph(uint64_t seed, std::shared_ptr<const OpRegistry> ops)
    : ops_(ops != nullptr ? std::move(ops) : std::make_shared<const OpRegistry>(BuiltinOps())) {
  def_.set_seed(seed);
  def_.set_loss(-1);
  def_.set_output(-1);
  def_.set_accuracy(-1);
}

absl::StatusOr<Graph> Graph::FromProto(const v1::GraphDef& proto,
                                       std::shared_ptr<const OpRegistry> ops) {
  Graph g(proto.seed(), std::move(ops));
  absl::flat_hash_set<std::string> variable_names;
  for (int i = 0; i < proto.nodes_size(); ++i) {
    const v1::NodeDef& n = proto.nodes(i);
    if (n.op() == v1::VARIABLE && !variable_names.insert(n.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph node ", i, ": variable name \"", n.name(), "\" is used twice"));
    }
    absl::StatusOr<int> added = g.AddNode(n);
    if (!added.ok()) return Annotate(added.status(), absl::StrCat("graph node ", i));
  }
  for (auto [field, value] :
       {std::pair<const char*, int>{"output", proto.output()}, {"accuracy", proto.accuracy()}}) {
    if (value < -1 || value >= g.num_nodes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph ", field, " index ", value, " is not a node (", g.num_nodes(), ")"));
    }
  }
  if (proto.loss() != -1) LS_RETURN_IF_ERROR(g.SetLoss(proto.loss()));
  LS_RETURN_IF_ERROR(g.SetPrecision(proto.precision()));
  g.def_.set_output(proto.output());
  g.def_.set_accuracy(proto.accuracy());
  return g;
}

absl::Status Graph::SetLoss(int node) {
  if (node < 0 || node >= num_nodes() || shape(node).rank() != 0 ||
      !(dtype(node) == DType::kF32 || dtype(node) == DType::kF64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph loss index ", node, " is not a floating scalar node"));
  }
  def_.set_loss(node);
  return absl::OkStatus();
}

absl::Status Graph::SetPrecision(v1::Precision::Mode precision) {
  if (!v1::Precision::Mode_IsValid(precision)) {
    return absl::InvalidArgumentError(
        absl::StrCat("precision: ", static_cast<int>(precision),
                     " is not a precision (F32, TF32 or BF16_MIXED)"));
  }
  if (precision == v1::Precision::BF16_MIXED || precision == v1::Precision::TF32) {
    for (int i = 0; i < num_nodes(); ++i) {
      if (dtype(i) == DType::kF64) {
        return absl::InvalidArgumentError(absl::StrCat(
            "precision: ", v1::Precision::Mode_Name(precision), " rounds f32 operands, but node ",
            i, " (\"", node(i).name(), "\") is f64; it is for f32 models"));
      }
    }
  }
  def_.set_precision(precision);
  return absl::OkStatus();
}

std::vector<VariableInfo> Graph::Variables() const {
  std::vector<VariableInfo> vars;
  for (int i = 0; i < num_nodes(); ++i) {
    const v1::NodeDef& n = node(i);
    if (n.op() != v1::VARIABLE) continue;
    vars.push_back(VariableInfo{n.name(), shape(i), dtype(i), n.trainable(), i});
  }
  return vars;
}

bool Graph::SumsOverReplicas() const {
  return std::any_of(def_.nodes().begin(), def_.nodes().end(), [](const v1::NodeDef& n) {
    return n.op() == v1::BATCH_NORM && n.synchronized();
  });
}

int Graph::FindInput(absl::string_view name) const {
  for (int i = 0; i < num_nodes(); ++i) {
    if (node(i).op() == v1::INPUT && node(i).name() == name) return i;
  }
  return -1;
}

absl::StatusOr<int> Graph::AddNode(v1::NodeDef node) {
  std::vector<TypedShape> inputs;
  for (int in : node.inputs()) {
    if (in < 0 || in >= num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          v1::OpType_Name(node.op()), " node \"", node.name(), "\": input ", in,
          " does not name an earlier node (graph nodes must be in topological order)"));
    }
    inputs.push_back(TypedShape{shape(in), dtype(in)});
  }
  if ((node.op() == v1::INPUT || node.op() == v1::VARIABLE) && node.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(v1::OpType_Name(node.op()), " node ", num_nodes(), " has no name"));
  }
  if (node.op() == v1::VARIABLE && !Shape::FromProto(node.shape()).fully_known()) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable \"", node.name(), "\" must have a fully known shape"));
  }
  LS_ASSIGN_OR_RETURN(TypedShape out, ops_->InferOutput(node, inputs));
  if (node.name().empty()) {
    node.set_name(
        absl::StrCat(absl::AsciiStrToLower(v1::OpType_Name(node.op())), "_", num_nodes()));
  }
  *node.mutable_shape() = out.shape.ToProto();
  node.set_dtype(DTypeToProto(out.dtype));
  *def_.add_nodes() = std::move(node);
  dtypes_.push_back(static_cast<int>(out.dtype));
  return num_nodes() - 1;
}

absl::StatusOr<int> Graph::Input(absl::string_view name, DType dtype, Shape shape) {
  v1::NodeDef n;
  n.set_op(v1::INPUT);
  n.set_name(std::string(name));
  n.set_dtype(DTypeToProto(dtype));
  *n.mutable_shape() = shape.ToProto();
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Variable(absl::string_view name, DType dtype, Shape shape,
                                    const v1::Initializer& init, int64_t fan_in, int64_t fan_out,
                                    bool trainable) {
  for (int i = 0; i < num_nodes(); ++i) {
    if (node(i).op() == v1::VARIABLE && node(i).name() == name) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable name \"", name, "\" is already used"));
    }
  }
  v1::NodeDef n;
  n.set_op(v1::VARIABLE);
  n.set_name(std::string(name));
  n.set_dtype(DTypeToProto(dtype));
  *n.mutable_shape() = shape.ToProto();
  *n.mutable_initializer() = init;
  n.set_fan_in(fan_in);
  n.set_fan_out(fan_out);
  n.set_trainable(trainable);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Op(v1::OpType op, std::vector<int> inputs, absl::string_view name) {
  return AddNode(NewNode(op, inputs, name));
}

absl::StatusOr<int> Graph::Sum(int x, std::vector<int64_t> axes, bool keep_dims,
                               absl::string_view name) {
  v1::NodeDef n;
  n.set_name(std::string(name));
  n.set_op(v1::SUM);
  n.add_inputs(x);
  for (int64_t a : axes) n.add_axes(a);
  n.set_keep_dims(keep_dims);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Mean(int x, std::vector<int64_t> axes, bool keep_dims,
                                absl::string_view name) {
  v1::NodeDef n;
  n.set_name(std::string(name));
  n.set_op(v1::MEAN);
  n.add_inputs(x);
  for (int64_t a : axes) n.add_axes(a);
  n.set_keep_dims(keep_dims);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Concat(std::vector<int> inputs, int64_t axis, absl::string_view name) {
  v1::NodeDef n;
  n.set_op(v1::CONCAT);
  n.set_name(std::string(name));
  for (int in : inputs) n.add_inputs(in);
  n.set_axis(axis);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::LayerNorm(int x, int gamma, int beta, float epsilon,
                                     absl::string_view name) {
  v1::NodeDef n = NewNode(v1::LAYER_NORM, {x, gamma, beta}, name);
  n.set_epsilon(epsilon);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::SparseSoftmaxCrossEntropy(int logits, int labels, float label_smoothing,
                                                     absl::string_view name) {
  v1::NodeDef n = NewNode(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {logits, labels}, name);
  n.set_label_smoothing(label_smoothing);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::BatchNorm(std::vector<int> inputs, float momentum, float epsilon,
                                     absl::string_view name, int64_t virtual_batch_size,
                                     bool synchronized) {
  v1::NodeDef n = NewNode(v1::BATCH_NORM, inputs, name);
  n.set_momentum(momentum);
  n.set_epsilon(epsilon);
  n.set_virtual_batch_size(virtual_batch_size);
  n.set_synchronized(synchronized);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::SelfAttention(int x, int w_qkv, int w_o, int num_heads, bool causal,
                                         absl::string_view name) {
  v1::NodeDef n;
  n.set_op(v1::SELF_ATTENTION);
  n.set_name(std::string(name));
  n.add_inputs(x);
  n.add_inputs(w_qkv);
  n.add_inputs(w_o);
  n.set_num_heads(num_heads);
  n.set_causal(causal);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Reshape(int x, std::vector<int64_t> target_shape) {
  v1::NodeDef n;
  n.set_op(v1::RESHAPE);
  n.add_inputs(x);
  for (int64_t d : target_shape) n.add_target_shape(d);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Conv2D(int x, int filter, std::vector<int> strides, v1::Padding padding,
                                  absl::string_view name) {
  v1::NodeDef n;
  n.set_op(v1::CONV2D);
  n.set_name(std::string(name));
  n.add_inputs(x);
  n.add_inputs(filter);
  for (int s : strides) n.add_strides(s);
  n.set_padding(padding);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::MaxPool2D(int x, std::vector<int> window, std::vector<int> strides,
                                     v1::Padding padding, absl::string_view name) {
  v1::NodeDef n;
  n.set_op(v1::MAX_POOL2D);
  n.set_name(std::string(name));
  n.add_inputs(x);
  for (int w : window) n.add_window(w);
  for (int s : strides) n.add_strides(s);
  n.set_padding(padding);
  return AddNode(std::move(n));
}

absl::StatusOr<int> Graph::Dropout(int x, float rate, absl::string_view name) {
  v1::NodeDef n;
  n.set_op(v1::DROPOUT);
  n.set_name(std::string(name));
  n.add_inputs(x);
  n.set_rate(rate);
  return AddNode(std::move(n));
}

}  // namespace lockstep::engine

// Graph: the compute graph IR a replica runs, a thin builder and validator over
// lockstep.v1.GraphDef (proto/lockstep/v1/graph.proto), which is what the coordinator
// ships to workers. Nodes are kept in topological order; a node is named by its index.
// Every node added (by a builder method or by FromProto) is validated and its static
// output shape inferred through the graph's OpRegistry (each op's shape function), so a
// Graph is always well formed. The registry is shared (copies of a Graph share it) and also
// gives the Executor its kernels; by default it is BuiltinOps().
//
// Variables are VARIABLE nodes with stable names ("dense_0/kernel"); variable_nodes()
// lists them in creation order, which is the order of Executor gradients and Optimizer
// variables. Thread model: build on one thread; a built Graph is immutable and may be
// shared (const) by any number of executors.
#ifndef LOCKSTEP_ENGINE_GRAPH_H_
#define LOCKSTEP_ENGINE_GRAPH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/dtype.h"
#include "engine/op_registry.h"
#include "engine/shape.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

struct VariableInfo {
  std::string name;
  Shape shape;
  DType dtype;
  bool trainable;
  int node;  // index in the graph
};

class Graph {
 public:
  // `ops`: the ops this graph may use (null: BuiltinOps()).
  explicit Graph(uint64_t seed = 0, std::shared_ptr<const OpRegistry> ops = nullptr);

  // Validates every node (inputs precede it, shapes agree, attributes sane) and the
  // loss/output/accuracy indices. INVALID_ARGUMENT naming the node otherwise.
  static absl::StatusOr<Graph> FromProto(const v1::GraphDef& proto,
                                         std::shared_ptr<const OpRegistry> ops = nullptr);
  const v1::GraphDef& proto() const { return def_; }
  const OpRegistry& ops() const { return *ops_; }

  int num_nodes() const { return def_.nodes_size(); }
  const v1::NodeDef& node(int i) const { return def_.nodes(i); }
  Shape shape(int i) const { return Shape::FromProto(def_.nodes(i).shape()); }
  DType dtype(int i) const { return static_cast<DType>(dtypes_[i]); }
  uint64_t seed() const { return def_.seed(); }
  // How the products compute (graph.proto's Precision): the executor hands it to every
  // kernel (KernelContext::precision).
  v1::Precision::Mode precision() const { return def_.precision(); }
  // INVALID_ARGUMENT "precision: ..." for an unknown mode, or BF16_MIXED on a graph with f64
  // nodes (mixed precision rounds f32 operands). Call once the nodes are added.
  absl::Status SetPrecision(v1::Precision::Mode precision);
  // Some node sums over the replicas of a sync group while it trains
  // (KernelContext::cross_replica_sum: synchronized batch normalization).
  bool SumsOverReplicas() const;

  int loss() const { return def_.loss(); }
  int output() const { return def_.output(); }
  int accuracy() const { return def_.accuracy(); }
  absl::Status SetLoss(int node);
  void set_output(int node) { def_.set_output(node); }
  void set_accuracy(int node) { def_.set_accuracy(node); }

  std::vector<VariableInfo> Variables() const;
  // Index of the INPUT node fed under `name`, or -1.
  int FindInput(absl::string_view name) const;

  // Builders. Each returns the new node's index or INVALID_ARGUMENT naming the problem.
  absl::StatusOr<int> Input(absl::string_view name, DType dtype, Shape shape);
  absl::StatusOr<int> Variable(absl::string_view name, DType dtype, Shape shape,
                               const v1::Initializer& init, int64_t fan_in, int64_t fan_out,
                               bool trainable = true);
  absl::StatusOr<int> Op(v1::OpType op, std::vector<int> inputs, absl::string_view name = "");
  absl::StatusOr<int> Sum(int x, std::vector<int64_t> axes, bool keep_dims,
                          absl::string_view name = "");
  absl::StatusOr<int> Mean(int x, std::vector<int64_t> axes, bool keep_dims,
                           absl::string_view name = "");
  absl::StatusOr<int> Concat(std::vector<int> inputs, int64_t axis, absl::string_view name = "");
  absl::StatusOr<int> LayerNorm(int x, int gamma, int beta, float epsilon,
                                absl::string_view name = "");
  // SPARSE_SOFTMAX_CROSS_ENTROPY with targets (1 - label_smoothing) * one_hot + ls / classes.
  absl::StatusOr<int> SparseSoftmaxCrossEntropy(int logits, int labels, float label_smoothing,
                                                absl::string_view name = "");
  // Inputs x, gamma, beta, moving_mean, moving_variance. virtual_batch_size: batch rows per
  // statistics group (0: the whole batch). synchronized: statistics over every replica's
  // batch (KernelContext::cross_replica_sum); not with virtual batches.
  absl::StatusOr<int> BatchNorm(std::vector<int> inputs, float momentum, float epsilon,
                                absl::string_view name = "", int64_t virtual_batch_size = 0,
                                bool synchronized = false);
  absl::StatusOr<int> SelfAttention(int x, int w_qkv, int w_o, int num_heads, bool causal,
                                    absl::string_view name = "");
  absl::StatusOr<int> Reshape(int x, std::vector<int64_t> target_shape);
  absl::StatusOr<int> Conv2D(int x, int filter, std::vector<int> strides, v1::Padding padding,
                             absl::string_view name = "");
  absl::StatusOr<int> MaxPool2D(int x, std::vector<int> window, std::vector<int> strides,
                                v1::Padding padding, absl::string_view name = "");
  absl::StatusOr<int> Dropout(int x, float rate, absl::string_view name = "");

  // Adds a fully described node (inputs, op, attributes); fills in shape and dtype.
  absl::StatusOr<int> AddNode(v1::NodeDef node);

 private:
  std::shared_ptr<const OpRegistry> ops_;
  v1::GraphDef def_;
  std::vector<int> dtypes_;  // engine DType per node, cached
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_GRAPH_H_

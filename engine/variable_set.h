// VariableSet: the values of a graph's variables, in Graph::Variables() order, addressable
// by stable name, serialisable as NamedTensor (checkpoints, broadcasts from the chief).
//
// Ownership: holds its Tensors (tensors() is what Executor and Optimizer take).
// Thread model: not synchronised; one owner thread (a replica) or external locking.
#ifndef LOCKSTEP_ENGINE_VARIABLE_SET_H_
#define LOCKSTEP_ENGINE_VARIABLE_SET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/graph.h"
#include "engine/tensor.h"
#include "lockstep/v1/tensor.pb.h"

namespace lockstep::engine {

class VariableSet {
 public:
  VariableSet() = default;

  // Every variable drawn from its initializer with the graph's seed. Deterministic: the
  // same graph always gives bitwise the same values.
  static absl::StatusOr<VariableSet> Initialize(const Graph& graph);

  int size() const { return static_cast<int>(tensors_.size()); }
  const std::string& name(int i) const { return infos_[i].name; }
  const VariableInfo& info(int i) const { return infos_[i]; }
  // Index of the variable called `name`, or -1.
  int Find(absl::string_view name) const;
  Tensor& tensor(int i) { return tensors_[i]; }
  const Tensor& tensor(int i) const { return tensors_[i]; }
  std::vector<Tensor>& tensors() { return tensors_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // Deep copy (a replica's own mirror).
  VariableSet Clone() const;

  std::vector<v1::NamedTensor> ToProtos() const;
  // Overwrites every variable from `protos` (by name). INVALID_ARGUMENT naming the variable
  // when one is missing, unknown, or of another dtype or shape.
  absl::Status Restore(const std::vector<v1::NamedTensor>& protos);

 private:
  std::vector<VariableInfo> infos_;
  std::vector<Tensor> tensors_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_VARIABLE_SET_H_

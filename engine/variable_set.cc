#include "engine/variable_set.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/initializers.h"

namespace lockstep::engine {

absl::StatusOr<VariableSet> VariableSet::Initialize(const Graph& graph) {
  VariableSet set;
  set.infos_ = graph.Variables();
  for (const VariableInfo& info : set.infos_) {
    const v1::NodeDef& node = graph.node(info.node);
    Tensor t(info.dtype, info.shape);
    LS_RETURN_IF_ERROR(engine::Initialize(node.initializer(), graph.seed(), info.name,
                                          node.fan_in(), node.fan_out(), &t));
    set.tensors_.push_back(std::move(t));
  }
  return set;
}

int VariableSet::Find(absl::string_view name) const {
  for (int i = 0; i < size(); ++i) {
    if (infos_[i].name == name) return i;
  }
  return -1;
}

VariableSet VariableSet::Clone() const {
  VariableSet copy;
  copy.infos_ = infos_;
  for (const Tensor& t : tensors_) copy.tensors_.push_back(t.Clone());
  return copy;
}

std::vector<v1::NamedTensor> VariableSet::ToProtos() const {
  std::vector<v1::NamedTensor> protos;
  for (int i = 0; i < size(); ++i) protos.push_back(tensors_[i].ToNamedProto(infos_[i].name));
  return protos;
}

absl::Status VariableSet::Restore(const std::vector<v1::NamedTensor>& protos) {
  absl::flat_hash_map<std::string, const v1::NamedTensor*> by_name;
  for (const v1::NamedTensor& p : protos) {
    if (Find(p.name()) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("restoring variables: \"", p.name(), "\" is not a variable of this model"));
    }
    by_name[p.name()] = &p;
  }
  std::vector<Tensor> restored;
  for (int i = 0; i < size(); ++i) {
    auto it = by_name.find(infos_[i].name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("restoring variables: \"", infos_[i].name, "\" is missing"));
    }
    absl::StatusOr<Tensor> t = Tensor::FromProto(it->second->tensor());
    if (!t.ok())
      return Annotate(t.status(), absl::StrCat("restoring variable \"", infos_[i].name, "\""));
    if (t->dtype() != infos_[i].dtype || t->shape() != infos_[i].shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("restoring variable \"", infos_[i].name, "\": got ", t->DebugString(),
                       ", the model has ", DTypeName(infos_[i].dtype), infos_[i].shape.ToString()));
    }
    restored.push_back(*std::move(t));
  }
  tensors_ = std::move(restored);
  return absl::OkStatus();
}

}  // namespace lockstep::engine

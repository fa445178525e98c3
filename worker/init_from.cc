#include "worker/init_from.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "export/safetensors.h"

namespace lockstep {
namespace worker {
namespace {

// "F32[64,128]"
std::string Describe(const v1::TensorProto& t) {
  return absl::StrCat(v1::DType_Name(t.dtype()), "[", absl::StrJoin(t.shape().dims(), ","), "]");
}

}  // namespace

absl::StatusOr<v1::Checkpoint> InitialCheckpoint(
    const exporting::Weights& exported, const std::string& path,
    const std::vector<v1::NamedTensor>& model_variables, std::vector<v1::NamedTensor> slots) {
  std::map<std::string, const v1::NamedTensor*> by_name;
  for (const v1::NamedTensor& t : exported.tensors) by_name[t.name()] = &t;
  v1::Checkpoint c;
  std::vector<std::string> problems;
  for (const v1::NamedTensor& v : model_variables) {
    auto it = by_name.find(v.name());
    if (it == by_name.end()) {
      problems.push_back(absl::StrCat("variable \"", v.name(), "\" is missing"));
      continue;
    }
    const v1::TensorProto& have = it->second->tensor();
    if (have.dtype() != v.tensor().dtype() || Describe(have) != Describe(v.tensor())) {
      problems.push_back(absl::StrCat("variable \"", v.name(), "\" is ", Describe(have), " there, ",
                                      Describe(v.tensor()), " in the model"));
      continue;
    }
    *c.add_variables() = *it->second;
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "init_from.path: ", path, " does not fit the model: ", absl::StrJoin(problems, "; ")));
  }
  for (v1::NamedTensor& s : slots) *c.add_optimizer_slots() = std::move(s);
  c.set_global_step(0);
  return c;
}

absl::Status ApplyInitFrom(const v1::InitFrom& from, distribute::Trainer& trainer) {
  if (from.format() != v1::InitFrom::SAFETENSORS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "init_from.format: ", v1::InitFrom::Format_Name(from.format()), " is not SAFETENSORS"));
  }
  absl::StatusOr<exporting::Weights> exported = exporting::ReadSafetensorsFile(from.path());
  if (!exported.ok()) {
    return absl::Status(exported.status().code(),
                        absl::StrCat("init_from.path: ", exported.status().message()));
  }
  std::vector<v1::NamedTensor> model;
  LS_ASSIGN_OR_RETURN(std::vector<engine::Tensor> values, trainer.HostVariables());
  for (size_t i = 0; i < values.size(); ++i) {
    model.push_back(values[i].ToNamedProto(trainer.variables()[i].name()));
  }
  absl::StatusOr<v1::Checkpoint> initial =
      InitialCheckpoint(*exported, from.path(), model, trainer.optimizer().SaveState());
  if (!initial.ok()) return initial.status();
  return trainer.Restore(*initial);
}

}  // namespace worker
}  // namespace lockstep

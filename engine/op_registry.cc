#include "engine/op_registry.h"

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

const char* DeviceTypeName(Device::Type t) { return t == Device::Type::kCpu ? "CPU" : "CUDA"; }

}  // namespace

absl::Status OpRegistry::Register(OpDef def) {
  if (!def.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("op ", v1::OpType_Name(def.op), " is registered without a shape function"));
  }
  const v1::OpType op = def.op;
  if (!ops_.emplace(op, std::move(def)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("op ", v1::OpType_Name(op), " is registered twice"));
  }
  return absl::OkStatus();
}

const OpDef* OpRegistry::Find(v1::OpType op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<v1::OpType> OpRegistry::ops() const {
  std::vector<v1::OpType> out;
  for (const auto& [op, def] : ops_) out.push_back(op);
  return out;
}

absl::StatusOr<TypedShape> OpRegistry::InferOutput(const v1::NodeDef& node,
                                                   const std::vector<TypedShape>& inputs) const {
  const OpDef* def = Find(node.op());
  if (def == nullptr) return ShapeError(node, "unknown op");
  const int n = static_cast<int>(inputs.size());
  if (def->num_inputs == OpDef::kVariadic ? n < 1 : n != def->num_inputs) {
    return ShapeError(node, def->num_inputs == OpDef::kVariadic
                                ? absl::StrCat("takes one or more inputs, got ", n)
                                : absl::StrCat("takes ", def->num_inputs, " inputs, got ", n));
  }
  return def->shape(node, inputs);
}

absl::StatusOr<std::unique_ptr<OpKernel>> OpRegistry::CreateKernel(Device::Type device,
                                                                   const v1::NodeDef& node,
                                                                   DType compute_dtype) const {
  const OpDef* def = Find(node.op());
  if (def == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(v1::OpType_Name(node.op()), " node ", node.name(), ": unknown op"));
  }
  auto it = def->kernels.find(device);
  if (it == def->kernels.end()) {
    if (def->kernels.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(v1::OpType_Name(node.op()), " node ", node.name(), " has no kernel"));
    }
    return absl::UnimplementedError(absl::StrCat("no ", DeviceTypeName(device), " kernel for ",
                                                 v1::OpType_Name(node.op()), " node ",
                                                 node.name()));
  }
  return it->second(node, compute_dtype);
}

}  // namespace lockstep::engine

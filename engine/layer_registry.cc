#include "engine/layer_registry.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace lockstep::engine {

std::string LayerContext::field(absl::string_view name) const {
  return absl::StrCat(where, ".", name);
}

std::string LayerRegistry::KindName(v1::Layer::KindCase kind) {
  const google::protobuf::FieldDescriptor* field =
      v1::Layer::descriptor()->FindFieldByNumber(static_cast<int>(kind));
  if (field == nullptr || field->containing_oneof() == nullptr) return "";
  return field->name();
}

absl::Status LayerRegistry::Register(LayerDef def) {
  def.name = KindName(def.kind);
  if (def.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("layer kind ", static_cast<int>(def.kind),
                                                   " is not a field of model.proto's Layer.kind"));
  }
  if (!def.build) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer kind ", def.name, " is registered without a builder"));
  }
  const v1::Layer::KindCase kind = def.kind;
  const std::string name = def.name;
  if (!layers_.emplace(kind, std::move(def)).second) {
    return absl::AlreadyExistsError(absl::StrCat("layer kind ", name, " is registered twice"));
  }
  return absl::OkStatus();
}

const LayerDef* LayerRegistry::Find(v1::Layer::KindCase kind) const {
  auto it = layers_.find(kind);
  return it == layers_.end() ? nullptr : &it->second;
}

std::vector<std::string> LayerRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [kind, def] : layers_) out.push_back(def.name);
  return out;
}

std::vector<v1::Layer::KindCase> LayerRegistry::kinds() const {
  std::vector<v1::Layer::KindCase> out;
  for (const auto& [kind, def] : layers_) out.push_back(kind);
  return out;
}

}  // namespace lockstep::engine

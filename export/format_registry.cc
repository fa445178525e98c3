#include "export/format_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::exporting {

absl::Status FormatRegistry::Register(ExportFormat format) {
  if (format.name.empty() || !format.write) {
    return absl::InvalidArgumentError("an export format needs a name and a writer");
  }
  if (formats_.count(format.name) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("export format \"", format.name, "\" is registered twice"));
  }
  std::string name = format.name;
  formats_.emplace(std::move(name), std::move(format));
  return absl::OkStatus();
}

const ExportFormat* FormatRegistry::Find(const std::string& name) const {
  auto it = formats_.find(name);
  return it == formats_.end() ? nullptr : &it->second;
}

std::vector<std::string> FormatRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, format] : formats_) out.push_back(name);
  return out;
}

}  // namespace lockstep::exporting

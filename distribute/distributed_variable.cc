#include "distribute/distributed_variable.h"

#include "absl/strings/str_cat.h"
#include "distribute/distributed_values.h"

namespace lockstep::distribute {

std::string DistributedVariable::DebugString() const {
  const char* prefix = kind_ == Kind::kMirrored  ? "MirroredVariable"
                       : kind_ == Kind::kCentral ? "CentralVariable"
                                                 : "Variable";
  std::string values = DistributedValues::PerReplica(copies_).DebugString();
  // Reuse the component listing: "PerReplica:{...}" -> "<prefix> '<name>':{...}".
  return absl::StrCat(prefix, " '", name_, "'", values.substr(values.find(':')));
}

}  // namespace lockstep::distribute

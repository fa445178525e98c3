#include "engine/device.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lockstep::engine {

std::string Device::name() const {
  return absl::StrCat(type_ == Type::kCpu ? "/cpu:" : "/gpu:", index_);
}

absl::StatusOr<Device> Device::Parse(absl::string_view name) {
  std::string s = absl::AsciiStrToLower(name);
  absl::string_view v = s;
  absl::ConsumePrefix(&v, "/");
  absl::ConsumePrefix(&v, "device:");
  Type type;
  if (absl::ConsumePrefix(&v, "cpu:")) {
    type = Type::kCpu;
  } else if (absl::ConsumePrefix(&v, "gpu:")) {
    type = Type::kCuda;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", name, "\" is not of the form /cpu:N or /gpu:N"));
  }
  int index;
  if (!absl::SimpleAtoi(v, &index) || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device \"", name, "\" has no valid index (expected /cpu:N, N >= 0)"));
  }
  return Device(type, index);
}

}  // namespace lockstep::engine

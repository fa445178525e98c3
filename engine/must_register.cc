#include "engine/must_register.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep::engine::internal {

void AbortRegistration(absl::string_view registry, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", std::string(registry).c_str(),
               std::string(status.message()).c_str());
  std::abort();
}

}  // namespace lockstep::engine::internal

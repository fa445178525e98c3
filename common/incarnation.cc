#include "common/incarnation.h"

#include "absl/strings/str_format.h"
#include "common/secure_random.h"

namespace lockstep {

uint64_t NewIncarnation() {
  uint64_t id = 0;
  while (id == 0) id = SecureRandomUint64();
  return id;
}

std::string ShortIncarnation(uint64_t incarnation) {
  return absl::StrFormat("%016x", incarnation).substr(0, 8);
}

}  // namespace lockstep

#include "common/incarnation.h"

#include "absl/random/random.h"
#include "absl/strings/str_format.h"

namespace lockstep {

uint64_t NewIncarnation() {
  absl::BitGen gen;  // seeded from the OS entropy source
  uint64_t id = 0;
  while (id == 0) id = absl::Uniform<uint64_t>(gen);
  return id;
}

std::string ShortIncarnation(uint64_t incarnation) {
  return absl::StrFormat("%016x", incarnation).substr(0, 8);
}

}  // namespace lockstep

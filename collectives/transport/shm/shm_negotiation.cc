#include "collectives/transport/shm/shm_negotiation.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep {
namespace collectives {

absl::StatusOr<SegmentAdvert> ParseSegmentAdvert(absl::string_view value, int rank,
                                                 size_t min_bytes) {
  const std::vector<std::string> parts = absl::StrSplit(value, ' ');
  SegmentAdvert advert;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &advert.bytes) || advert.bytes < min_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " published shm segment \"", value,
                     "\", not \"<name> <bytes>\"; do all ranks run the same Lockstep version?"));
  }
  advert.name = parts[0];
  return advert;
}

std::string CapabilityField(absl::string_view list, absl::string_view key) {
  const std::string prefix = absl::StrCat(key, "=");
  for (absl::string_view f : absl::StrSplit(list, ';')) {
    if (absl::ConsumePrefix(&f, prefix)) return std::string(f);
  }
  return "";
}

}  // namespace collectives
}  // namespace lockstep

// Fuzz target: how a shared-memory rank reads what its peers published in the Store
// (collectives/transport/shm/shm_negotiation.h): the segment advert "<name> <bytes>" and the
// capability list "cma=...;direct=..." (CapabilityField, as ShmTransport::Connect compares each
// peer's to its own). The whole input is given to both parsers. A capability read out of a list
// must not hold a ';' and must be found again in the list as "<key>=<value>".
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "collectives/transport/shm/shm_negotiation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view value(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::collectives::SegmentAdvert> advert =
      lockstep::collectives::ParseSegmentAdvert(value, 1, 4096);
  if (advert.ok() && (advert->bytes < 4096 || absl::StrContains(advert->name, ' '))) std::abort();
  for (const char* key : {"cma", "direct"}) {
    const std::string field = lockstep::collectives::CapabilityField(value, key);
    if (absl::StrContains(field, ';')) std::abort();
    if (!field.empty() && !absl::StrContains(value, absl::StrCat(key, "=", field))) std::abort();
  }
  return 0;
}

// What the ranks of a shared-memory group tell each other through the Store while
// ShmTransport::Connect forms the group, and how each reads what the others published:
//
//   <prefix>/shm/<rank>         "<segment name> <segment bytes>"         ParseSegmentAdvert
//   <prefix>/shm_mapped/<rank>  "cma=<threshold or 0>;direct=<threshold or off>"
//                               (a ';'-separated list of key=value)      CapabilityField
//
// A rank uses single copy (cma) or the zero-copy heap (direct) only when every rank published
// the same value for it. Values come from other processes, so these parse anything without
// harm; they are unit-tested and fuzzed (fuzz/shm_negotiation_fuzzer.cc).
// Thread model: stateless functions.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_NEGOTIATION_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_NEGOTIATION_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {
namespace collectives {

// A rank's shared-memory segment, as it published it.
struct SegmentAdvert {
  std::string name;
  size_t bytes = 0;
};

// Rank `rank`'s advert `value`; FAILED_PRECONDITION unless it is "<name> <bytes>" with at least
// `min_bytes` bytes.
absl::StatusOr<SegmentAdvert> ParseSegmentAdvert(absl::string_view value, int rank,
                                                 size_t min_bytes);

// The value of the first "<key>=<value>" field of `list`; "" when there is none.
std::string CapabilityField(absl::string_view list, absl::string_view key);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_NEGOTIATION_H_

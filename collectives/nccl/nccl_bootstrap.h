// Bootstrap of an NCCL communicator through the job attempt's rendezvous store: rank 0
// creates the ncclUniqueId and publishes it (hex-encoded) under `key`; the other ranks read
// it. The store is the attempt's (worker/coordinator_store.h scopes keys by job and attempt),
// so a restarted attempt never reads an old id. Stateless; thread-safe.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_NCCL_BOOTSTRAP_H_
#define LOCKSTEP_COLLECTIVES_NCCL_NCCL_BOOTSTRAP_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectives/nccl/nccl_api.h"
#include "collectives/store.h"

namespace lockstep::collectives::nccl {

// The unique id every rank passes to CommInitRank (kNcclUniqueIdBytes bytes). Errors: the
// store's (DEADLINE_EXCEEDED naming the key when rank 0 never published it, ALREADY_EXISTS
// when the key was already set in this attempt), NCCL's from GetUniqueId, and
// FAILED_PRECONDITION when the published value is not an id (the message names the key).
absl::StatusOr<std::string> ExchangeUniqueId(Store& store, NcclApi& api, int rank,
                                             absl::string_view key, absl::Time deadline);

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_NCCL_BOOTSTRAP_H_

// Store: the rendezvous through which the ranks of a communicator find each other
// (addresses, shared-memory segment names, NCCL unique ids).
//
// Keys are set once and read by every rank; Get blocks until the key exists or the deadline
// passes. Implementations: InMemoryStore (tests, one process), and in worker/ a Store over
// the coordinator's key-value service (SetKey / GetKey), scoped by job and attempt.
//
// Errors every implementation returns:
//   Set: ALREADY_EXISTS if the key is set (keys are write-once), UNAVAILABLE if the backing
//        service cannot be reached, ABORTED if Abort() was called.
//   Get: DEADLINE_EXCEEDED naming the key when it is still missing at the deadline,
//        UNAVAILABLE, ABORTED.
// Thread model: all methods are thread-safe; Abort() may be called from any thread and
// wakes every blocked Get.
#ifndef LOCKSTEP_COLLECTIVES_STORE_H_
#define LOCKSTEP_COLLECTIVES_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep {
namespace collectives {

class Store {
 public:
  virtual ~Store() = default;

  virtual absl::Status Set(absl::string_view key, absl::string_view value) = 0;
  virtual absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) = 0;
  // Makes every pending and later call return ABORTED.
  virtual void Abort() = 0;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_STORE_H_

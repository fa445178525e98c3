// KvStore: the coordinator's key-value store for rendezvous (peer addresses, NCCL unique
// ids). Keys are strings scoped by their writers (e.g. "job/attempt/rank0/addr").
//
// Get waits until the key exists or a deadline passes; waits use the injected Clock, so
// tests drive deadlines with a FakeClock. Shutdown() wakes every waiter.
// Ownership: owns the data; borrows the Clock. Thread model: thread-safe, one mutex.
#ifndef LOCKSTEP_COORDINATOR_KV_STORE_H_
#define LOCKSTEP_COORDINATOR_KV_STORE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace lockstep {
namespace coordinator {

class KvStore {
 public:
  explicit KvStore(Clock* clock) : clock_(clock) {}

  // Errors: INVALID_ARGUMENT (empty key), ALREADY_EXISTS (key set and !overwrite),
  // UNAVAILABLE (shut down).
  absl::Status Set(const std::string& key, const std::string& value, bool overwrite);

  // Waits until `key` exists or `deadline` passes. Errors: DEADLINE_EXCEEDED naming the
  // key, UNAVAILABLE (shut down while waiting).
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline);

  // Deletes every key that starts with `prefix` (an ended job attempt's); returns how many.
  int DeletePrefix(const std::string& prefix);
  int size();

  // Wakes every waiter (UNAVAILABLE); later calls fail the same way.
  void Shutdown();

 private:
  Clock* const clock_;
  absl::Mutex mu_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_KV_STORE_H_

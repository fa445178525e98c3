// KvStore: the coordinator's key-value store for rendezvous (peer addresses, NCCL unique
// ids). Keys are strings scoped by their writers (e.g. "jobs/<job>/<attempt>/rank0/addr").
//
// Get waits until the key exists or a deadline passes; waits use the injected Clock, so
// tests drive deadlines with a FakeClock. Shutdown() wakes every waiter.
//
// Limits (KvLimits, coordinator flags): a key's and a value's size, and per job the number
// of entries and the bytes (keys plus values) it holds. A job's keys are those under
// "jobs/<job>/"; every other key counts towards the workers' common area, which has the same
// limits; and the Get calls waiting at once, per job and per caller, each for at most
// max_wait (wait_limits.h). Past a limit the call answers RESOURCE_EXHAUSTED naming the
// job (or caller), the limit and the flag that raises it. DeletePrefix gives the room back.
// Ownership: owns the data; borrows the Clock. Thread model: thread-safe, one mutex.
#ifndef LOCKSTEP_COORDINATOR_KV_STORE_H_
#define LOCKSTEP_COORDINATOR_KV_STORE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/wait_limits.h"

namespace lockstep {
namespace coordinator {

struct KvLimits {
  int64_t max_key_bytes = 1024;
  int64_t max_value_bytes = 1 << 20;              // --max_kv_value_bytes
  int64_t max_entries_per_job = 10000;            // --max_kv_entries_per_job
  int64_t max_bytes_per_job = int64_t{64} << 20;  // --max_kv_bytes_per_job
  // Get calls waiting for a key at once, per job and per caller (each holds a server
  // thread), and the longest wait.
  WaitLimitOptions waits;
};

// The scope a key or barrier id counts towards: "jobs/<job>/" for a job's, "" (the workers'
// common area) for any other.
std::string KvScopeOf(const std::string& key);
// "job <id>" or "the workers' common area", for messages.
std::string KvScopeName(const std::string& scope);

class KvStore {
 public:
  explicit KvStore(Clock* clock, KvLimits limits = {})
      : clock_(clock), limits_(limits), waits_(limits.waits) {}

  // Errors: INVALID_ARGUMENT (empty key, a key or value over its size limit),
  // ALREADY_EXISTS (key set and !overwrite), RESOURCE_EXHAUSTED (the key's job holds as
  // many entries or bytes as it may), UNAVAILABLE (shut down).
  absl::Status Set(const std::string& key, const std::string& value, bool overwrite);

  // Waits until `key` exists or `deadline` passes (at most limits.waits.max_wait from now).
  // `caller` is who waits (the worker's identity). Errors: DEADLINE_EXCEEDED naming the
  // key, RESOURCE_EXHAUSTED when the key's job or the caller already has as many calls
  // waiting as it may, UNAVAILABLE (shut down while waiting).
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline,
                                  const std::string& caller = "");

  // Deletes every key that starts with `prefix` (an ended job attempt's); returns how many.
  int DeletePrefix(const std::string& prefix);
  int size();

  // Wakes every waiter (UNAVAILABLE); later calls fail the same way.
  void Shutdown();

 private:
  struct Usage {
    int64_t entries = 0;
    int64_t bytes = 0;
  };
  void ReleaseLocked(const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const KvLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Usage> usage_ ABSL_GUARDED_BY(mu_);  // by KvScopeOf
  WaitLimits waits_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_KV_STORE_H_

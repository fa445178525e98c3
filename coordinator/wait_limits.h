// WaitLimits: how many GetKey (or Barrier) calls may wait at once, counted per job and per
// caller, and how long one may wait. A waiting call holds a server thread, so one global
// pool would let one worker hold every place and stall every other job's rendezvous; here
// a job's calls count against that job (its scope, kv_store.h KvScopeOf: "jobs/<job>/", or
// the workers' common area) and a caller's against that caller (its certificate identity: the
// request names no task, and an identity holds at most --max_tasks_per_identity tasks), and a call
// must find room in both. A request for a longer wait than `max_wait` is clamped to it (not
// refused: the workers' rendezvous polls in slices and simply asks again), and the answer at the
// clamped deadline says so.
// KvStore and Barriers each own one (each kind of call is counted on its own) and use it
// under their own mutex.
// Ownership: a value type. Thread model: not thread-safe; the owner's lock guards it.
#ifndef LOCKSTEP_COORDINATOR_WAIT_LIMITS_H_
#define LOCKSTEP_COORDINATOR_WAIT_LIMITS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockstep {
namespace coordinator {

struct WaitLimitOptions {
  int max_per_job = 1024;                       // --max_waiting_calls_per_job
  int max_per_caller = 64;                      // --max_waiting_calls_per_caller
  absl::Duration max_wait = absl::Minutes(10);  // --max_wait_ms
};

class WaitLimits {
 public:
  explicit WaitLimits(WaitLimitOptions options = {}) : options_(options) {}

  // Takes a place for a call of `caller` in `scope` (the job's KvScopeOf);
  // RESOURCE_EXHAUSTED naming the job or the caller, the limit and its flag when either is
  // full. `call` names the call in the message ("GetKey \"jobs/j/1/addr\"") and
  // `scope_name` the job (KvScopeName). Every OK must be matched by one Release with the
  // same scope and caller.
  absl::Status Acquire(const std::string& scope, const std::string& caller, const std::string& call,
                       const std::string& scope_name);
  void Release(const std::string& scope, const std::string& caller);

  // `deadline`, or now + max_wait when that is sooner.
  absl::Time Clamp(absl::Time now, absl::Time deadline) const;
  // The note a deadline error carries when Clamp shortened the wait ("" when not).
  std::string ClampNote(absl::Time now, absl::Time requested) const;

  int waiting_in(const std::string& scope) const;
  int waiting_of(const std::string& caller) const;

 private:
  const WaitLimitOptions options_;
  std::map<std::string, int> per_job_;     // by scope
  std::map<std::string, int> per_caller_;  // by identity
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_WAIT_LIMITS_H_

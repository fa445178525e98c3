// Barriers: N parties meet under a barrier id (scoped by job and attempt by the caller).
//
// Arrive() blocks until `parties` distinct members have arrived or the deadline passes.
// A member arriving twice counts once (a retried RPC). Once complete, a barrier stays
// complete: late retries of its members return OK at once. On timeout the error names who
// arrived and who is missing (by name when the caller listed the expected members, else by
// count). Waits use the injected Clock.
// Limits (BarrierLimits, coordinator flags): barriers per job (ids under "jobs/<job>/", or
// the workers' common area for the others: KvScopeOf), parties per barrier and the size of
// an id or member name, and the calls waiting at once per job and per caller, each for at
// most max_wait (wait_limits.h); past one, RESOURCE_EXHAUSTED or INVALID_ARGUMENT naming the
// limit.
// Ownership: owns the barrier records; borrows the Clock. Thread model: thread-safe.
#ifndef LOCKSTEP_COORDINATOR_BARRIERS_H_
#define LOCKSTEP_COORDINATOR_BARRIERS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/wait_limits.h"

namespace lockstep {
namespace coordinator {

struct BarrierLimits {
  int64_t max_barriers_per_job = 10000;  // --max_barriers_per_job
  int max_parties = 65536;
  int64_t max_name_bytes = 1024;  // an id or a member
  // Arrive calls waiting at once, per job and per caller (each holds a server thread),
  // and the longest wait.
  WaitLimitOptions waits;
};

class Barriers {
 public:
  explicit Barriers(Clock* clock, BarrierLimits limits = {})
      : clock_(clock), limits_(limits), waits_(limits.waits) {}

  // `expected`: optional list of the members; when not empty, `parties` may be 0 and is
  // taken as its size. Errors: INVALID_ARGUMENT (empty id or member, parties < 1, a party
  // count or member list that disagrees with an earlier arrival, a member not in the
  // expected list, a new member after completion, parties or a name over its limit),
  // RESOURCE_EXHAUSTED (the id's job holds max_barriers_per_job barriers, or the job or
  // `caller`, the worker's identity, has as many calls waiting as it may),
  // DEADLINE_EXCEEDED naming who is missing, UNAVAILABLE (shut down).
  absl::Status Arrive(const std::string& id, const std::string& member, int parties,
                      const std::vector<std::string>& expected, absl::Time deadline,
                      const std::string& caller = "");

  // Deletes every barrier whose id starts with `prefix` (an ended job attempt's) that no one
  // waits on; returns how many.
  int size();
  int DeletePrefix(const std::string& prefix);

  // Wakes every waiter (UNAVAILABLE).
  void Shutdown();

 private:
  struct Barrier {
    int parties = 0;
    std::set<std::string> expected;
    std::set<std::string> arrived;
    bool complete = false;
    int waiters = 0;  // Arrive() calls waiting on it
  };

  Clock* const clock_;
  const BarrierLimits limits_;
  absl::Mutex mu_;
  std::map<std::string, Barrier> barriers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> per_scope_ ABSL_GUARDED_BY(mu_);  // by KvScopeOf
  WaitLimits waits_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_BARRIERS_H_

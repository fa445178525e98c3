// WatchLimits: how many server streams may be open at once. Clients' streams (WatchJob and
// GetJobLogs) are counted together, WatchAssignments streams per task (one is normal; a
// reconnecting worker may briefly hold a second), and every stream also takes a slot from
// its caller's identity's pool (a worker's certificate, a token's or client certificate's
// name), so that one identity cannot hold every stream, each of which holds a server
// thread. Under --insecure there are no identities: the other limits still hold. Open*() hands out
// a Slot that gives its place back when it is destroyed (at the end of the stream's handler); past
// a limit it answers RESOURCE_EXHAUSTED naming the limit and the coordinator flag that raises it.
// Ownership: owns the counts; a Slot must not outlive its WatchLimits.
// Thread model: thread-safe, one mutex.
#ifndef LOCKSTEP_COORDINATOR_WATCH_LIMITS_H_
#define LOCKSTEP_COORDINATOR_WATCH_LIMITS_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace lockstep {
namespace coordinator {

struct WatchLimitOptions {
  int max_job_watches = 256;                // --max_job_watches
  int max_assignment_watches_per_task = 4;  // --max_assignment_watches_per_task
  int max_streams_per_identity = 32;        // --max_streams_per_identity
};

class WatchLimits {
 public:
  // An open stream's place; movable, gives the place back when destroyed.
  class Slot {
   public:
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&&) = delete;
    ~Slot();

   private:
    friend class WatchLimits;
    Slot(WatchLimits* owner, std::string key) : owner_(owner), key_(std::move(key)) {}
    WatchLimits* owner_;  // nullptr: counts nothing
    std::string key_;
  };

  explicit WatchLimits(WatchLimitOptions options = {}) : options_(options) {}

  // RESOURCE_EXHAUSTED when max_job_watches WatchJob and GetJobLogs streams are open.
  absl::StatusOr<Slot> OpenJobWatch();
  // RESOURCE_EXHAUSTED when `identity` has max_streams_per_identity streams open (of any
  // kind). An empty identity (--insecure) is not counted: an empty Slot.
  absl::StatusOr<Slot> OpenIdentityStream(const std::string& identity);
  // RESOURCE_EXHAUSTED when `task` has max_assignment_watches_per_task streams open.
  absl::StatusOr<Slot> OpenAssignmentWatch(const std::string& task);
  // Streams open under `key` ("" for WatchJob and GetJobLogs, the task's name for
  // WatchAssignments, "identity:<name>" for an identity's).
  int open(const std::string& key) const;

 private:
  absl::StatusOr<Slot> Open(const std::string& key, int limit, const std::string& what);
  void Release(const std::string& key);

  const WatchLimitOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_WATCH_LIMITS_H_

// AbortSignal: how a worker tells the NCCL communicators of a job attempt to give up: the
// coordinator reported a peer lost (PeerLost), or the job is being torn down (Abort). The
// communicators check it while they wait for NCCL (init and every collective), and are woken
// by it (AddListener) rather than finding it at their next poll, then call ncclCommAbort, so
// that the survivors fail at once naming the lost rank instead of hanging in NCCL. The first
// notice wins; later ones are ignored.
//
// Shared (std::shared_ptr) by the worker and every communicator of the attempt. Thread
// model: thread-safe; any thread may signal.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_ABORT_SIGNAL_H_
#define LOCKSTEP_COLLECTIVES_NCCL_ABORT_SIGNAL_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::collectives::nccl {

class AbortSignal {
 public:
  // The coordinator lost `rank` (heartbeats stopped, the process died); `reason` says how.
  void PeerLost(int rank, std::string reason);
  // The communicators are no longer wanted (job cancelled, attempt ended).
  void Abort();

  // OK when nothing was signalled; otherwise what a communicator of `rank` reports when it
  // gives up in `what` ("all-reduce", "init"): UNAVAILABLE recording the lost rank
  // (collectives/transport/peer_failure.h: FailedRank), or ABORTED.
  absl::Status Check(int rank, absl::string_view what) const;

  // `wake` is called (on the signalling thread, without this signal's lock; it must not
  // block) by the first notice, or at once when one came already. Returns an id for
  // RemoveListener, which a listener must call before it goes.
  int AddListener(std::function<void()> wake);
  void RemoveListener(int id);

 private:
  // Calls every listener (after the first notice).
  void WakeListeners();

  mutable absl::Mutex mu_;
  bool signalled_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<int> lost_rank_ ABSL_GUARDED_BY(mu_);
  std::string reason_ ABSL_GUARDED_BY(mu_);
  // Held while listeners run, so that RemoveListener returns only once its listener is done.
  mutable absl::Mutex listeners_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 0;
  std::map<int, std::function<void()>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_ABORT_SIGNAL_H_

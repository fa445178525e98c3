// CoordinatorStore: the collectives' rendezvous Store over the coordinator's key-value
// service. Keys are scoped by a prefix ("<job>/<attempt>") so that attempts of a job, and
// different jobs, never see each other's keys: Set("rank0/addr") writes
// "<job>/<attempt>/rank0/addr".
//
// Get waits on the coordinator in slices of at most `poll_slice`, checking for Abort()
// between slices, so Abort() is honoured within one slice; the final error names the full
// key. Ownership: borrows the client and the Clock. Thread model: thread-safe.
#ifndef LOCKSTEP_WORKER_COORDINATOR_STORE_H_
#define LOCKSTEP_WORKER_COORDINATOR_STORE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collectives/store.h"
#include "common/clock.h"
#include "worker/worker_service_client.h"

namespace lockstep {
namespace worker {

class CoordinatorStore final : public collectives::Store {
 public:
  // `prefix`: e.g. "job-17/attempt-0"; must not be empty.
  CoordinatorStore(WorkerServiceClient* client, std::string prefix, Clock* clock,
                   absl::Duration poll_slice = absl::Milliseconds(200));

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override;
  void Abort() override;

  const std::string& prefix() const { return prefix_; }

 private:
  std::string Scoped(absl::string_view key) const;
  bool aborted() const;

  WorkerServiceClient* const client_;
  const std::string prefix_;
  Clock* const clock_;
  const absl::Duration poll_slice_;
  mutable absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_COORDINATOR_STORE_H_

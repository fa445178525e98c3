// JobService, watches: WatchJob's next event (NextEvent) and WatchAssignments' next
// Partition, AbortJob or PreemptJob for a worker (NextAssignment), both blocking on the
// service's mutex until a change or their deadline. Thread model: job_service.h.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/incarnation.h"
#include "common/status.h"
#include "coordinator/job_service.h"

namespace lockstep {
namespace coordinator {

absl::StatusOr<v1::JobEvent> JobService::NextEvent(const std::string& id, int64_t* seen,
                                                   absl::Time deadline) {
  absl::MutexLock l(&mu_);
  LS_RETURN_IF_ERROR(store_->Get(id).status());
  if (*seen > 0) {
    struct Wait {
      JobService* self;
      const std::string* id;
      int64_t seen;
    } w{this, &id, *seen};
    auto ready =
        +[](Wait* w) { return w->self->shutdown_ || w->self->VersionLocked(*w->id) > w->seen; };
    if (!clock_->WaitUntil(&mu_, absl::Condition(ready, &w), deadline)) {
      return absl::DeadlineExceededError(absl::StrCat("no change to job ", id));
    }
    if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  }
  *seen = VersionLocked(id);
  v1::JobEvent event;
  event.set_unix_micros(absl::ToUnixMicros(clock_->Now()));
  LS_ASSIGN_OR_RETURN(*event.mutable_job(), store_->Get(id));
  OverlayUnsavedLocked(*event.mutable_job());
  event.mutable_job()->clear_spec();  // the watcher has it (GetJob); events stay small
  if (auto it = changes_.find(id); it != changes_.end()) event.set_message(it->second.second);
  return event;
}

absl::StatusOr<v1::Assignment> JobService::NextAssignment(const TaskRef& task, uint64_t incarnation,
                                                          absl::Time deadline) {
  bool known = false;
  for (const v1::TaskStatus& t : membership_->Snapshot()) {
    if (RefOf(t) != task) continue;
    known = true;
    if (t.incarnation() != incarnation || t.state() != v1::ALIVE) {
      return absl::AbortedError(
          absl::StrCat(task.ToString(), " incarnation ", ShortIncarnation(incarnation),
                       " is not the registered ALIVE one (", ShortIncarnation(t.incarnation()),
                       ", ", v1::TaskState_Name(t.state()), "): re-register"));
    }
  }
  if (!known) {
    return absl::NotFoundError(absl::StrCat(task.ToString(),
                                            " is not registered with this coordinator: "
                                            "register before watching assignments"));
  }
  absl::MutexLock l(&mu_);
  Mailbox& box = mailboxes_[task];
  if (box.incarnation != incarnation) box = Mailbox{incarnation, {}};  // drop a predecessor's
  struct Wait {
    JobService* self;
    Mailbox* box;
    uint64_t incarnation;
  } w{this, &box, incarnation};
  auto ready = +[](Wait* w) {
    return w->self->shutdown_ || !w->box->queue.empty() || w->box->incarnation != w->incarnation;
  };
  if (!clock_->WaitUntil(&mu_, absl::Condition(ready, &w), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat("no assignment for ", task.ToString()));
  }
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (box.incarnation != incarnation) {
    return absl::AbortedError(absl::StrCat(task.ToString(), " incarnation ",
                                           ShortIncarnation(incarnation),
                                           " was replaced by a newer registration"));
  }
  v1::Assignment a = std::move(box.queue.front());
  box.queue.pop_front();
  return a;
}

}  // namespace coordinator
}  // namespace lockstep

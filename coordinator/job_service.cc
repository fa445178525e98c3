#include "coordinator/job_service.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/incarnation.h"
#include "common/status.h"
#include "coordinator/job_validation.h"
#include "coordinator/partitioner.h"

namespace lockstep {
namespace coordinator {
namespace {

bool IsTrainingTask(const v1::TaskStatus& t) {
  return t.task().type() == "worker" || t.task().type() == "chief";
}

TaskRef RefOf(const v1::TaskStatus& t) { return TaskRef{t.task().type(), t.task().index()}; }

bool EndedAttempt(v1::JobReport::Phase phase) {
  return phase == v1::JobReport::DONE || phase == v1::JobReport::FAILED ||
         phase == v1::JobReport::ABORTED || phase == v1::JobReport::PREEMPTED;
}

// Workers a job needs; 0 means "every ALIVE training worker".
int WorkersNeeded(const v1::JobSpec& spec) {
  if (spec.num_workers() > 0) return spec.num_workers();
  return EffectiveStrategy(spec) == v1::MULTI_WORKER_MIRRORED ? 0 : 1;
}

v1::JobProgress ProgressOf(const v1::JobReport& r) {
  v1::JobProgress p;
  p.set_step(r.step());
  p.set_loss(r.loss());
  p.set_examples_per_sec(r.examples_per_sec());
  p.set_busbw_gbps(r.busbw_gbps());
  p.set_total_steps(r.total_steps());
  p.set_train_accuracy(r.train_accuracy());
  p.set_eval_accuracy(r.eval_accuracy());
  p.set_learning_rate(r.learning_rate());
  p.set_epoch(r.epoch());
  p.set_checkpoint_path(r.checkpoint_path());
  p.set_summary_dir(r.summary_dir());
  p.set_step_ms(r.step_ms());
  p.set_compute_ms(r.compute_ms());
  p.set_allreduce_wait_ms(r.allreduce_wait_ms());
  p.set_apply_ms(r.apply_ms());
  p.set_restored_step(r.restored_step());
  return p;
}

// The reason a job enters RESTARTING with: what failed, and which restart this is.
std::string RestartReason(const std::string& failure, const v1::JobRecord& record,
                          int max_restarts) {
  return absl::StrCat(failure, "; restarting from the newest checkpoint (restart ",
                      record.restarts() + 1, " of ", max_restarts, ")");
}

// What a FAILED reason adds when the restart policy allowed restarts.
std::string NoRestartsLeft(int restarts, int max_restarts) {
  if (max_restarts <= 0) return "";
  return absl::StrCat(" (no restart left: ", restarts, " of restart_policy.max_restarts ",
                      max_restarts, " used)");
}

}  // namespace

absl::Duration EffectiveFailureGrace(const JobServiceOptions& options,
                                     const MembershipOptions& membership) {
  return std::max(options.failure_grace,
                  membership.heartbeat_timeout + membership.heartbeat_interval);
}

JobService::JobService(JobStore* store, Membership* membership, Clock* clock,
                       JobServiceOptions options)
    : store_(store),
      membership_(membership),
      clock_(clock),
      failure_grace_(EffectiveFailureGrace(options, membership->options())) {}

absl::Status JobService::Recover() {
  LS_ASSIGN_OR_RETURN(std::vector<v1::JobRecord> jobs, store_->List(0));
  absl::MutexLock l(&mu_);
  for (const v1::JobRecord& job : jobs) {
    if (job.state() == v1::RUNNING) {
      // Its workers belonged to the previous coordinator: they drop the attempt when they
      // find this one (a new coordinator incarnation). The restart policy decides.
      v1::JobSpec spec;
      const int max_restarts =
          spec.ParseFromString(job.spec()) ? spec.restart_policy().max_restarts() : 0;
      const std::string why = absl::StrCat(
          "coordinator restarted while the job was running "
          "(attempt ",
          job.attempt(), ")");
      if (job.restarts() < max_restarts) {
        LS_RETURN_IF_ERROR(
            store_->UpdateState(job.id(), v1::RESTARTING, RestartReason(why, job, max_restarts))
                .status());
        pending_.insert(job.id());
      } else {
        LS_RETURN_IF_ERROR(
            store_
                ->UpdateState(job.id(), v1::FAILED,
                              absl::StrCat(why, NoRestartsLeft(job.restarts(), max_restarts)))
                .status());
      }
    } else if (job.state() == v1::PENDING || job.state() == v1::RESTARTING) {
      pending_.insert(job.id());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobService::Submit(const v1::JobSpec& spec) {
  LS_RETURN_IF_ERROR(ValidateJobSpec(spec));
  // The batch must split over the replicas of the workers the job would get now; when
  // none are ALIVE yet this is checked again at scheduling.
  std::vector<WorkerSlot> slots;
  for (const v1::TaskStatus& t : membership_->Snapshot()) {
    if (t.state() == v1::ALIVE && IsTrainingTask(t)) {
      slots.push_back(WorkerSlot{RefOf(t), t.address(), t.devices_size()});
    }
  }
  const int needed = WorkersNeeded(spec);
  if (needed > 0 && static_cast<int>(slots.size()) >= needed) slots.resize(needed);
  if (needed == 0 || static_cast<int>(slots.size()) == needed) {
    LS_RETURN_IF_ERROR(CheckBatchDivisible(spec, CountReplicas(spec, slots)));
  }
  // Last, after every pure check: the file system (it creates nothing).
  LS_RETURN_IF_ERROR(CheckJobDirectories(spec));
  absl::MutexLock l(&mu_);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  LS_ASSIGN_OR_RETURN(v1::JobRecord record, store_->Create(spec.name(), spec.SerializeAsString()));
  pending_.insert(record.id());
  ChangedLocked(record.id(), "submitted: PENDING");
  ScheduleLocked();
  return record.id();
}

absl::StatusOr<v1::GetJobResponse> JobService::Get(const std::string& id) {
  absl::MutexLock l(&mu_);
  v1::GetJobResponse out;
  LS_ASSIGN_OR_RETURN(*out.mutable_job(), store_->Get(id));
  if (!out.mutable_spec()->ParseFromString(out.job().spec())) {
    return absl::DataLossError(absl::StrCat("job ", id, ": stored spec cannot be parsed"));
  }
  if (auto it = active_.find(id); it != active_.end()) {
    for (const TaskRef& t : it->second.tasks) {
      auto r = it->second.reports.find(t);
      if (r != it->second.reports.end()) *out.add_workers() = r->second;
    }
  } else if (auto e = ended_.find(id); e != ended_.end()) {
    for (const TaskRef& t : e->second.tasks) {
      auto r = e->second.reports.find(t);
      if (r != e->second.reports.end()) *out.add_workers() = r->second;
    }
  }
  return out;
}

absl::StatusOr<std::vector<v1::JobRecord>> JobService::List(int limit) {
  return store_->List(limit);
}

absl::StatusOr<v1::JobRecord> JobService::Cancel(const std::string& id, const std::string& reason) {
  absl::MutexLock l(&mu_);
  LS_ASSIGN_OR_RETURN(v1::JobRecord record, store_->Get(id));
  if (JobStore::IsTerminal(record.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ended: ", v1::JobState_Name(record.state()),
                     record.reason().empty() ? "" : absl::StrCat(" (", record.reason(), ")")));
  }
  const std::string why = reason.empty() ? "cancelled by the user" : reason;
  if (active_.count(id) > 0) {
    EndLocked(id, v1::CANCELLED, why);
  } else {
    LS_RETURN_IF_ERROR(store_->UpdateState(id, v1::CANCELLED, why).status());
    pending_.erase(id);
    restart_workers_.erase(id);
    ChangedLocked(id, absl::StrCat("CANCELLED: ", why));
  }
  ScheduleLocked();
  return store_->Get(id);
}

int64_t JobService::VersionLocked(const std::string& id) const {
  auto it = changes_.find(id);
  return it == changes_.end() ? 1 : it->second.first;
}

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

void JobService::OnReports(const TaskRef& task, const std::vector<v1::JobReport>& reports) {
  absl::MutexLock l(&mu_);
  for (const v1::JobReport& r : reports) {
    auto it = active_.find(r.job_id());
    if (it == active_.end() || it->second.attempt != r.attempt()) {
      if (auto e = ended_.find(r.job_id());
          e != ended_.end() && e->second.attempt == r.attempt() &&
          std::find(e->second.tasks.begin(), e->second.tasks.end(), task) !=
              e->second.tasks.end()) {
        e->second.reports[task] = r;
        if (EndedAttempt(r.phase())) {
          e->second.leaving.erase(task);  // left: may run the next job
        } else {
          e->second.leaving[task] = clock_->Now() + failure_grace_;  // still in it
        }
      }
      // A report on an attempt that is over: make sure the worker drops it.
      if (!EndedAttempt(r.phase())) {
        v1::Assignment a;
        a.mutable_abort()->set_job_id(r.job_id());
        a.mutable_abort()->set_attempt(r.attempt());
        a.mutable_abort()->set_reason("this attempt of the job is over");
        auto box = mailboxes_.find(task);
        if (box != mailboxes_.end()) PushLocked(task, box->second.incarnation, std::move(a));
      }
      continue;
    }
    Active& job = it->second;
    const auto rank = std::find(job.tasks.begin(), job.tasks.end(), task) - job.tasks.begin();
    if (rank == static_cast<long>(job.tasks.size())) continue;  // not one of its workers
    job.reports[task] = r;
    if (rank == 0) {
      // The chief's figures are the job's.
      if (store_->UpdateProgress(r.job_id(), ProgressOf(r)).ok()) {
        ChangedLocked(r.job_id(), absl::StrCat("step ", r.step(), "/", r.total_steps()));
      }
    }
    if (r.phase() == v1::JobReport::PREEMPTED && job.preemption.empty()) {
      job.preemption = absl::StrCat("preempted after step ", r.step(), ": checkpoint written");
    }
    if (r.phase() == v1::JobReport::PREEMPTED && !r.preemption().empty()) {
      job.preemption =
          absl::StrCat(task.ToString(), " (rank ", rank, ") was preempted (", r.preemption(),
                       "); the job stopped after step ", r.step(), " with a checkpoint");
    }
    if (r.phase() == v1::JobReport::FAILED && job.failure.empty()) {
      job.failure = absl::StrCat(task.ToString(), " (rank ", rank,
                                 ") failed: ", r.error().empty() ? "no error given" : r.error());
      job.fail_at = clock_->Now() + failure_grace_;
      AbortOthersLocked(r.job_id(), job, task, job.failure);
    }
    SettleLocked(r.job_id());
  }
  ScheduleLocked();
}

void JobService::SettleLocked(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const Active& job = it->second;
  int done = 0, ended = 0;
  for (const TaskRef& t : job.tasks) {
    auto r = job.reports.find(t);
    if (r == job.reports.end()) continue;
    done += r->second.phase() == v1::JobReport::DONE;
    ended += EndedAttempt(r->second.phase());
  }
  const int n = static_cast<int>(job.tasks.size());
  if (job.failure.empty() && !job.preemption.empty() && ended == n) {
    // Not a failure: the next attempt resumes from the step the group stopped after.
    restart_workers_[id] = n;
    EndLocked(id, v1::RESTARTING,
              absl::StrCat(job.preemption,
                           "; restarting from it (a preemption: not counted "
                           "against restart_policy.max_restarts)"),
              /*counts_as_restart=*/false);
    pending_.insert(id);
  } else if (job.failure.empty() && done == n) {
    const v1::JobReport& chief = job.reports.at(job.tasks[0]);
    EndLocked(id, v1::SUCCEEDED,
              absl::StrCat("every worker finished: ", chief.step(), " steps, loss ", chief.loss()));
  } else if (!job.failure.empty() && ended == n) {
    FailLocked(id, job.failure);
  }
}

void JobService::Tick() {
  const std::vector<v1::TaskStatus> tasks = membership_->Snapshot();
  absl::MutexLock l(&mu_);
  std::map<TaskRef, const v1::TaskStatus*> by_ref;
  for (const v1::TaskStatus& t : tasks) by_ref[RefOf(t)] = &t;
  std::vector<std::pair<std::string, std::string>> to_fail;
  for (const auto& [id, job] : active_) {
    for (size_t rank = 0; rank < job.tasks.size(); ++rank) {
      const TaskRef& ref = job.tasks[rank];
      auto r = job.reports.find(ref);
      if (r != job.reports.end() && EndedAttempt(r->second.phase())) continue;
      auto t = by_ref.find(ref);
      std::string why;
      if (t == by_ref.end()) {
        why = "is no longer registered";
      } else if (t->second->incarnation() != job.incarnations.at(ref)) {
        why = absl::StrCat("restarted (incarnation ", ShortIncarnation(t->second->incarnation()),
                           " replaced ", ShortIncarnation(job.incarnations.at(ref)), ")");
      } else if (t->second->state() == v1::LOST) {
        why = absl::StrCat("was lost: no heartbeat for ",
                           absl::FormatDuration(membership_->options().heartbeat_timeout),
                           "; check that lockstepd at ", t->second->address(), " is running");
      } else if (t->second->state() == v1::DEREGISTERED) {
        why = "left the cluster (deregistered) while running the job";
      }
      if (why.empty()) continue;
      std::string reason = absl::StrCat(ref.ToString(), " (rank ", rank, ") ", why);
      if (!job.failure.empty()) absl::StrAppend(&reason, "; before that, ", job.failure);
      to_fail.emplace_back(id, std::move(reason));
      break;
    }
    if (to_fail.empty() || to_fail.back().first != id) {
      if (!job.failure.empty() && clock_->Now() >= job.fail_at)
        to_fail.emplace_back(id, job.failure);
    }
  }
  for (const auto& [id, reason] : to_fail) FailLocked(id, reason);
  ScheduleLocked();
}

std::map<TaskRef, std::pair<std::string, int64_t>> JobService::RunningTasks() {
  absl::MutexLock l(&mu_);
  std::map<TaskRef, std::pair<std::string, int64_t>> out;
  for (const auto& [id, job] : active_) {
    for (const TaskRef& t : job.tasks) {
      auto r = job.reports.find(t);
      out[t] = {id, r == job.reports.end() ? 0 : r->second.step()};
    }
  }
  return out;
}

void JobService::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

void JobService::ScheduleLocked() {
  if (shutdown_ || pending_.empty()) return;
  const std::vector<v1::TaskStatus> tasks = membership_->Snapshot();
  ReleaseLeftLocked(tasks);
  while (!pending_.empty()) {
    const std::string id = *pending_.begin();
    absl::StatusOr<v1::JobRecord> record = store_->Get(id);
    if (!record.ok() || (record->state() != v1::PENDING && record->state() != v1::RESTARTING)) {
      pending_.erase(id);
      continue;
    }
    if (!TryStartLocked(*record, tasks)) return;  // oldest first: the others wait behind it
    pending_.erase(id);
  }
}

bool JobService::TryStartLocked(const v1::JobRecord& record,
                                const std::vector<v1::TaskStatus>& tasks) {
  const std::string& id = record.id();
  if (auto prev = ended_.find(id); prev != ended_.end() && !prev->second.leaving.empty()) {
    return false;  // a restart waits until every worker left the failed attempt
  }
  v1::JobSpec spec;
  if (!spec.ParseFromString(record.spec())) {
    (void)store_->UpdateState(id, v1::FAILED, "the stored spec cannot be parsed");
    ChangedLocked(id, "FAILED: the stored spec cannot be parsed");
    return true;
  }
  std::vector<const v1::TaskStatus*> alive, idle;
  for (const v1::TaskStatus& t : tasks) {
    if (t.state() != v1::ALIVE || !IsTrainingTask(t)) continue;
    alive.push_back(&t);
    if (!IsBusyLocked(RefOf(t))) idle.push_back(&t);
  }
  int needed = WorkersNeeded(spec);
  if (auto r = restart_workers_.find(id); r != restart_workers_.end()) needed = r->second;
  if (needed == 0) {
    if (alive.empty() || idle.size() != alive.size()) return false;
    needed = static_cast<int>(alive.size());
  }
  if (static_cast<int>(idle.size()) < needed) return false;
  idle.resize(needed);
  std::vector<WorkerSlot> slots;
  std::vector<std::string> names;
  for (const v1::TaskStatus* t : idle) {
    slots.push_back(WorkerSlot{RefOf(*t), t->address(), t->devices_size()});
    names.push_back(RefOf(*t).ToString());
  }
  const int attempt = record.attempt() + 1;
  absl::StatusOr<std::vector<v1::Partition>> parts =
      MakePartitions(id, attempt, spec, slots, NewJobSecret());
  if (!parts.ok()) {
    const std::string why = std::string(parts.status().message());
    (void)store_->UpdateState(id, v1::FAILED, why);
    ChangedLocked(id, absl::StrCat("FAILED: ", why));
    return true;
  }
  for (v1::Partition& p : *parts) {
    p.set_job_uid(absl::StrCat(id, "@", record.created_unix_micros()));
  }
  const std::string message =
      absl::StrCat("RUNNING on ", absl::StrJoin(names, ", "), " (attempt ", attempt, ")");
  absl::StatusOr<v1::JobRecord> running = store_->UpdateState(id, v1::RUNNING, message);
  if (!running.ok()) return true;  // logged by the caller's next GetJob; nothing was pushed
  if (running->progress().restored_step() > 0) {
    // What the previous attempt restored; this one's chief says what it restores.
    v1::JobProgress progress = running->progress();
    progress.clear_restored_step();
    (void)store_->UpdateProgress(id, std::move(progress));
  }
  Active job;
  job.attempt = attempt;
  job.spec = spec;
  for (size_t i = 0; i < idle.size(); ++i) {
    const TaskRef ref = RefOf(*idle[i]);
    job.tasks.push_back(ref);
    job.incarnations[ref] = idle[i]->incarnation();
    v1::Assignment a;
    *a.mutable_run() = std::move((*parts)[i]);
    PushLocked(ref, idle[i]->incarnation(), std::move(a));
  }
  active_[id] = std::move(job);
  ended_.erase(id);
  restart_workers_.erase(id);
  ChangedLocked(id, message);
  return true;
}

void JobService::FailLocked(const std::string& id, const std::string& reason) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const int max_restarts = it->second.spec.restart_policy().max_restarts();
  absl::StatusOr<v1::JobRecord> record = store_->Get(id);
  if (record.ok() && record->restarts() < max_restarts) {
    restart_workers_[id] = static_cast<int>(it->second.tasks.size());
    EndLocked(id, v1::RESTARTING, RestartReason(reason, *record, max_restarts));
    pending_.insert(id);  // scheduled like a pending job, once its workers left the attempt
    return;
  }
  EndLocked(
      id, v1::FAILED,
      absl::StrCat(reason, NoRestartsLeft(record.ok() ? record->restarts() : 0, max_restarts)));
}

void JobService::EndLocked(const std::string& id, v1::JobState state, const std::string& reason,
                           bool counts_as_restart) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Active& job = it->second;
  if (state != v1::SUCCEEDED) AbortOthersLocked(id, job, TaskRef{}, reason);
  (void)store_->UpdateState(id, state, reason, counts_as_restart);
  for (const TaskRef& t : job.tasks) {
    auto r = job.reports.find(t);
    if (r == job.reports.end() || !EndedAttempt(r->second.phase())) {
      job.leaving[t] = clock_->Now() + failure_grace_;
    }
  }
  ended_[id] = std::move(job);
  active_.erase(it);
  ChangedLocked(id, absl::StrCat(v1::JobState_Name(state), ": ", reason));
}

void JobService::AbortOthersLocked(const std::string& id, const Active& job, const TaskRef& except,
                                   const std::string& reason) {
  for (const TaskRef& t : job.tasks) {
    if (t == except) continue;
    auto r = job.reports.find(t);
    if (r != job.reports.end() && EndedAttempt(r->second.phase())) continue;
    v1::Assignment a;
    a.mutable_abort()->set_job_id(id);
    a.mutable_abort()->set_attempt(job.attempt);
    a.mutable_abort()->set_reason(reason);
    PushLocked(t, job.incarnations.at(t), std::move(a));
  }
}

void JobService::PushLocked(const TaskRef& task, uint64_t incarnation, v1::Assignment a) {
  Mailbox& box = mailboxes_[task];
  if (box.incarnation != incarnation) box = Mailbox{incarnation, {}};
  box.queue.push_back(std::move(a));
}

void JobService::ChangedLocked(const std::string& id, std::string message) {
  changes_[id] = {++version_, std::move(message)};
}

// A worker leaves an ended attempt by reporting its end. Two things release it without
// that report:
// - It is no longer ALIVE under the incarnation it was given the job with (LOST,
//   DEREGISTERED, restarted, gone): that process will report nothing more, and a worker
//   that finds itself LOST or restarted drops its jobs; it must register again (and so
//   become ALIVE) before it is given a new one.
// - It said nothing about the attempt for the failure grace (at least heartbeat_timeout +
//   heartbeat_interval, so at least one heartbeat fell in it). Every heartbeat carries a
//   report of every job the worker still holds, finished ones included, so an ALIVE
//   worker silent about the attempt no longer holds it: it never received the partition,
//   or its final reports were lost on the way.
// A worker whose heartbeats keep reporting the attempt as running is NOT released, however
// long it takes: it says it still holds the job's threads, memory and ports, and a new
// partition started beside it would compete with it or fail. Every such report is
// answered with another abort (OnReports); if its executor never returns, the worker is
// stuck, `lockstep describe` of the ended job shows it, and restarting its lockstepd (a
// new incarnation) releases it. A silent worker therefore blocks nothing for longer than
// the grace, and a stuck one blocks only the jobs that would need it.
void JobService::ReleaseLeftLocked(const std::vector<v1::TaskStatus>& tasks) {
  std::map<TaskRef, const v1::TaskStatus*> by_ref;
  for (const v1::TaskStatus& t : tasks) by_ref[RefOf(t)] = &t;
  const absl::Time now = clock_->Now();
  for (auto& [id, job] : ended_) {
    for (auto it = job.leaving.begin(); it != job.leaving.end();) {
      auto t = by_ref.find(it->first);
      const bool gone = t == by_ref.end() || t->second->state() != v1::ALIVE ||
                        t->second->incarnation() != job.incarnations.at(it->first);
      it = gone || now >= it->second ? job.leaving.erase(it) : std::next(it);
    }
  }
}

bool JobService::IsBusyLocked(const TaskRef& task) const {
  for (const auto& [id, job] : active_) {
    if (std::find(job.tasks.begin(), job.tasks.end(), task) != job.tasks.end()) return true;
  }
  for (const auto& [id, job] : ended_) {
    if (job.leaving.count(task) > 0) return true;
  }
  return false;
}

}  // namespace coordinator
}  // namespace lockstep

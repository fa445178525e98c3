#include "coordinator/job_service.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/incarnation.h"
#include "common/status.h"
#include "coordinator/gpu_requirements.h"
#include "coordinator/job_validation.h"
#include "coordinator/partitioner.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {
namespace {

// The membership snapshot by task.
std::map<TaskRef, const v1::TaskStatus*> ByRef(const std::vector<v1::TaskStatus>& tasks) {
  std::map<TaskRef, const v1::TaskStatus*> by_ref;
  for (const v1::TaskStatus& t : tasks) by_ref[RefOf(t)] = &t;
  return by_ref;
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
  *p.mutable_device_memory() = r.device_memory();
  return p;
}

// How the store keeps an attempt's worker (or evaluator) for a restarted coordinator.
v1::AttemptWorkerRecord RecordOf(const AttemptWorker& w) {
  v1::AttemptWorkerRecord r;
  r.set_task_type(w.task.type);
  r.set_task_index(w.task.index);
  r.set_incarnation(w.incarnation);
  return r;
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
      failure_grace_(EffectiveFailureGrace(options, membership->options())),
      on_attempt_ended_(std::move(options.on_attempt_ended)),
      limits_(options.limits),
      max_pending_jobs_(options.max_pending_jobs),
      retained_jobs_(options.retained_jobs),
      watches_(options.watches) {}

absl::Status JobService::CheckKeyAccess(const std::string& identity, const std::string& key) {
  if (identity.empty() || !absl::StartsWith(key, "jobs/")) return absl::OkStatus();
  std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 3));
  int attempt = 0;
  if (parts.size() < 4 || !absl::SimpleAtoi(parts[2], &attempt)) {
    return absl::PermissionDeniedError(
        absl::StrCat("key \"", key, "\": job keys are jobs/<job>/<attempt>/<name>"));
  }
  absl::MutexLock l(&mu_);
  auto it = active_.find(parts[1]);
  if (it == active_.end() || it->second.attempt() != attempt) {
    return absl::PermissionDeniedError(
        absl::StrCat("key \"", key, "\": job ", parts[1], " attempt ", attempt, " is not running"));
  }
  for (const AttemptWorker& w : it->second.workers()) {
    if (membership_->IdentityOf(w.task) == identity) return absl::OkStatus();
  }
  if (auto e = evaluators_.find(parts[1]); e != evaluators_.end() && !e->second.ended &&
                                           e->second.attempt == attempt &&
                                           membership_->IdentityOf(e->second.task) == identity) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "key \"", key, "\": ", identity, " is not a worker of job ", parts[1], " attempt ", attempt));
}

bool JobService::RunsAttempt(const TaskRef& task, const std::string& job_id, int attempt) {
  absl::MutexLock l(&mu_);
  for (const std::map<std::string, JobAttempt>* attempts : {&active_, &ended_}) {
    auto it = attempts->find(job_id);
    if (it != attempts->end() && it->second.attempt() == attempt && it->second.RankOf(task) >= 0) {
      return true;
    }
  }
  auto e = evaluators_.find(job_id);
  return e != evaluators_.end() && e->second.attempt == attempt && e->second.task == task;
}

absl::Status JobService::Recover() {
  LS_ASSIGN_OR_RETURN(std::vector<v1::JobRecord> jobs, store_->List(0));
  absl::MutexLock l(&mu_);
  retire_due_ = true;  // a store kept by a coordinator with a longer retention is trimmed
  const absl::Time now = clock_->Now();
  for (const v1::JobRecord& job : jobs) {
    v1::JobSpec stored;
    if (job.state() == v1::RUNNING && job.attempt_workers_size() > 0 &&
        stored.ParseFromString(job.spec())) {
      // Its workers train on (the data plane needs no coordinator) and register again with
      // their incarnations; their reports take the attempt on from here. One that does not
      // come back within the failure grace is lost, as any other.
      std::vector<AttemptWorker> workers;
      for (const v1::AttemptWorkerRecord& w : job.attempt_workers()) {
        workers.push_back(AttemptWorker{TaskRef{w.task_type(), w.task_index()}, w.incarnation()});
      }
      active_.insert_or_assign(job.id(), JobAttempt(job.id(), job.attempt(), std::move(stored),
                                                    std::move(workers), now));
      if (job.has_attempt_evaluator()) {
        // Its evaluator too: busy, its reports and key-value access count, and it is lost
        // only as the workers are, when it has not registered again within the grace.
        const v1::AttemptWorkerRecord& e = job.attempt_evaluator();
        evaluators_[job.id()] = Evaluator{
            TaskRef{e.task_type(), e.task_index()}, e.incarnation(), job.attempt(), {}, false};
      }
      adopted_until_[job.id()] = now + failure_grace_;
      ChangedLocked(job.id(), absl::StrCat("re-adopted attempt ", job.attempt(),
                                           " after a coordinator restart"));
      continue;
    }
    if (job.state() == v1::RUNNING) {
      // Its attempt is not stored (a record from an older coordinator): the restart policy
      // decides.
      v1::JobSpec spec;
      const int max_restarts =
          spec.ParseFromString(job.spec()) ? spec.restart_policy().max_restarts() : 0;
      const std::string why = absl::StrCat(
          "coordinator restarted while the job was running "
          "(attempt ",
          job.attempt(), ")");
      // A store that does not take the state leaves it unsaved (retried), not the
      // coordinator down.
      if (job.restarts() < max_restarts) {
        SaveStateLocked(job.id(), v1::RESTARTING, RestartReason(why, job, max_restarts));
        scheduler_.Enqueue(job.id());
      } else {
        SaveStateLocked(job.id(), v1::FAILED,
                        absl::StrCat(why, NoRestartsLeft(job.restarts(), max_restarts)));
      }
    } else if (CanApply(JobTransition::kStartAttempt, job.state())) {
      scheduler_.Enqueue(job.id());
    }
  }
  return absl::OkStatus();
}

absl::Status JobService::CheckElastic(const v1::JobSpec& spec,
                                      const std::vector<WorkerSlot>& alive) const {
  const v1::RestartPolicy& policy = spec.restart_policy();
  if (policy.min_workers() <= 0) return absl::OkStatus();
  const absl::Duration heartbeat_timeout = membership_->options().heartbeat_timeout;
  if (policy.replacement_timeout_ms() > 0 &&
      absl::Milliseconds(policy.replacement_timeout_ms()) < heartbeat_timeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("restart_policy.replacement_timeout_ms: ", policy.replacement_timeout_ms(),
                     " is shorter than the coordinator's heartbeat timeout (",
                     absl::FormatDuration(heartbeat_timeout),
                     "): a lost worker is not even known to be lost by then"));
  }
  const int per_worker = alive.empty() ? 1 : std::max(1, alive[0].devices);
  const int most = policy.max_workers() > 0 ? policy.max_workers()
                   : spec.num_workers() > 0 ? spec.num_workers()
                                            : std::max<int>(alive.size(), policy.min_workers());
  std::vector<int> usable, elsewhere;
  for (int c = 1; c <= std::max(most, 2 * most); ++c) {
    if (spec.global_batch_size() % (static_cast<int64_t>(c) * per_worker) != 0) continue;
    (c >= policy.min_workers() && c <= most ? usable : elsewhere).push_back(c);
  }
  if (usable.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("restart_policy.min_workers: no worker count from ", policy.min_workers(),
                     " to ", most, " splits global_batch_size ", spec.global_batch_size(),
                     " over its replicas (", per_worker, " per worker); counts that would: ",
                     elsewhere.empty() ? "none" : absl::StrJoin(elsewhere, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JobService::Submit(const v1::JobSpec& spec) {
  LS_RETURN_IF_ERROR(ValidateJobSpec(spec));
  // The batch must split over the replicas of the workers the job would get now; when
  // none are ALIVE yet this is checked again at scheduling.
  std::vector<WorkerSlot> slots;
  std::vector<v1::TaskStatus> alive;  // for CheckGpuRequirements
  for (const v1::TaskStatus& t : membership_->Snapshot()) {
    if (t.state() == v1::ALIVE && IsTrainingTask(t)) {
      alive.push_back(t);
      slots.push_back(WorkerSlot{RefOf(t), t.address(), ReplicaDevices(t, spec.gpus())});
    }
  }
  const int needed = WorkersNeeded(spec);
  if (needed > 0 && static_cast<int>(slots.size()) >= needed) slots.resize(needed);
  const bool known = needed == 0 || static_cast<int>(slots.size()) == needed;
  if (known) LS_RETURN_IF_ERROR(CheckBatchDivisible(spec, CountReplicas(spec, slots)));
  // With no workers known yet, one replica would hold the whole batch.
  LS_RETURN_IF_ERROR(CheckModelSize(spec, limits_, known ? CountReplicas(spec, slots) : 1));
  LS_RETURN_IF_ERROR(CheckElastic(spec, slots));
  LS_RETURN_IF_ERROR(CheckGpuRequirements(spec, alive));
  // The output directories are the workers' to check (job_validation.h): nothing on this
  // host's file system is looked at.
  absl::MutexLock l(&mu_);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (const size_t queued = scheduler_.Queue().size();
      static_cast<int64_t>(queued) >= max_pending_jobs_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(queued,
                     " jobs are already queued (PENDING or RESTARTING), the limit (coordinator "
                     "flag --max_pending_jobs); wait for some to start or cancel them"));
  }
  LS_ASSIGN_OR_RETURN(v1::JobRecord record, store_->Create(spec.name(), spec.SerializeAsString()));
  scheduler_.Enqueue(record.id());
  ChangedLocked(record.id(), "submitted: PENDING");
  ScheduleLocked();
  return record.id();
}

absl::StatusOr<v1::GetJobResponse> JobService::Get(const std::string& id) {
  absl::MutexLock l(&mu_);
  v1::GetJobResponse out;
  LS_ASSIGN_OR_RETURN(*out.mutable_job(), store_->Get(id));
  OverlayUnsavedLocked(*out.mutable_job());
  if (!out.mutable_spec()->ParseFromString(out.job().spec())) {
    return absl::DataLossError(absl::StrCat("job ", id, ": stored spec cannot be parsed"));
  }
  const JobAttempt* attempt = nullptr;
  if (auto it = active_.find(id); it != active_.end()) {
    attempt = &it->second;
  } else if (auto e = ended_.find(id); e != ended_.end()) {
    attempt = &e->second;
  }
  if (attempt != nullptr) {
    for (v1::JobReport& r : attempt->Reports()) *out.add_workers() = std::move(r);
  }
  if (auto e = evaluators_.find(id); e != evaluators_.end()) {
    out.mutable_evaluator_task()->set_type(e->second.task.type);
    out.mutable_evaluator_task()->set_index(e->second.task.index);
    *out.mutable_evaluator() = e->second.report;
  }
  return out;
}

absl::StatusOr<std::vector<v1::JobRecord>> JobService::List(int limit) {
  LS_ASSIGN_OR_RETURN(std::vector<v1::JobRecord> records, store_->List(limit));
  absl::MutexLock l(&mu_);
  for (v1::JobRecord& r : records) OverlayUnsavedLocked(r);
  return records;
}

absl::StatusOr<v1::JobRecord> JobService::Cancel(const std::string& id, const std::string& reason) {
  absl::MutexLock l(&mu_);
  LS_ASSIGN_OR_RETURN(v1::JobRecord record, store_->Get(id));
  OverlayUnsavedLocked(record);
  if (IsTerminalJobState(record.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ended: ", v1::JobState_Name(record.state()),
                     record.reason().empty() ? "" : absl::StrCat(" (", record.reason(), ")")));
  }
  const std::string why = reason.empty() ? "cancelled by the user" : reason;
  if (active_.count(id) > 0) {
    EndLocked(id, v1::CANCELLED, why);
  } else {
    // The caller is told when the store does not take it; nothing changed then.
    LS_RETURN_IF_ERROR(store_->UpdateState(id, v1::CANCELLED, why).status());
    unsaved_.erase(id);  // a RESTARTING the store had not taken: CANCELLED replaces it
    start_retries_.erase(id);
    scheduler_.Remove(id);
    retire_due_ = true;
    ChangedLocked(id, absl::StrCat("CANCELLED: ", why));
  }
  ScheduleLocked();
  LS_ASSIGN_OR_RETURN(v1::JobRecord cancelled, store_->Get(id));
  OverlayUnsavedLocked(cancelled);
  return cancelled;
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

void JobService::OnReports(const TaskRef& task, const std::vector<v1::JobReport>& reports) {
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  for (const v1::JobReport& r : reports) {
    if (OnEvaluatorReportLocked(task, r)) continue;
    auto it = active_.find(r.job_id());
    if (it == active_.end() || it->second.attempt() != r.attempt()) {
      if (auto e = ended_.find(r.job_id());
          e != ended_.end() && e->second.attempt() == r.attempt()) {
        e->second.OnLeavingReport(task, r, now, failure_grace_);
      }
      // A report on an attempt that is over: make sure the worker drops it.
      if (!EndsAttempt(r.phase())) {
        v1::Assignment a;
        a.mutable_abort()->set_job_id(r.job_id());
        a.mutable_abort()->set_attempt(r.attempt());
        a.mutable_abort()->set_reason("this attempt of the job is over");
        // Advisory, and named by the worker: at most kMaxAdvisoryAborts wait in its mailbox,
        // so reports of made-up attempts cannot grow it.
        auto box = mailboxes_.find(task);
        if (box != mailboxes_.end() && box->second.queue.size() < kMaxAdvisoryAborts) {
          PushLocked(task, box->second.incarnation, std::move(a));
        }
      }
      continue;
    }
    JobAttempt& job = it->second;
    const int rank = job.RankOf(task);
    if (rank < 0) continue;  // not one of its workers
    if (rank == 0) {
      // The chief's figures are the job's.
      if (store_->UpdateProgress(r.job_id(), ProgressOf(r)).ok()) {
        ChangedLocked(r.job_id(), absl::StrCat("step ", r.step(), "/", r.total_steps()));
      }
    }
    if (job.OnReport(task, r, now, failure_grace_)) {
      AbortLocked(job, job.Unended(task), job.failure());
    }
    SettleLocked(r.job_id());
  }
  ScheduleLocked();
}

void JobService::SettleLocked(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const JobAttempt& job = it->second;
  switch (job.Settle(clock_->Now())) {
    case JobAttempt::Outcome::kUndecided:
      return;
    case JobAttempt::Outcome::kSucceeded: {
      const v1::JobReport& chief = *job.ReportOf(0);
      EndLocked(
          id, v1::SUCCEEDED,
          absl::StrCat("every worker finished: ", chief.step(), " steps, loss ", chief.loss()));
      return;
    }
    case JobAttempt::Outcome::kFailed:
      FailLocked(id, job.failure());
      return;
    case JobAttempt::Outcome::kPreempted: {
      // Not a failure: the next attempt resumes from the step the group stopped after, on
      // as many workers (more when it stopped to grow).
      const WorkerNeed need = RestartNeedLocked(job, std::max(job.size(), job.resize_to()));
      EndLocked(id, v1::RESTARTING,
                absl::StrCat(job.preemption(),
                             "; restarting from it (a preemption: not counted against "
                             "restart_policy.max_restarts)"),
                /*counts_as_restart=*/false);
      scheduler_.Enqueue(id, need);
      return;
    }
  }
}

void JobService::Tick() {
  const std::vector<v1::TaskStatus> tasks = membership_->Snapshot();
  const std::map<TaskRef, const v1::TaskStatus*> by_ref = ByRef(tasks);
  absl::MutexLock l(&mu_);
  struct Lost {
    std::string id;
    std::string reason;
    int rank = 0;
  };
  std::vector<Lost> to_fail;
  std::vector<std::string> to_settle;
  for (const auto& [id, job] : active_) {
    if (auto a = adopted_until_.find(id); a != adopted_until_.end()) {
      if (clock_->Now() < a->second) continue;  // its workers are still coming back
      adopted_until_.erase(a);
    }
    int rank = 0;
    std::string lost = job.FindLostWorker(by_ref, membership_->options().heartbeat_timeout, &rank);
    if (!lost.empty()) {
      if (!job.failure().empty()) absl::StrAppend(&lost, "; before that, ", job.failure());
      to_fail.push_back(Lost{id, std::move(lost), rank});
    } else {
      to_settle.push_back(id);  // a failure whose grace ran out
    }
  }
  for (const Lost& l : to_fail) {
    active_.at(l.id).MarkLost(l.rank);  // the survivors' aborts name it
    FailLocked(l.id, l.reason);
  }
  for (const std::string& id : to_settle) SettleLocked(id);
  ReleaseEvaluatorsLocked(by_ref);
  SaveUnsavedLocked();
  ScheduleLocked();
  GrowLocked(tasks);
  RetireLocked();
}

absl::Duration JobService::StoreWriteFailedLocked(const std::string& id, absl::string_view what,
                                                  const absl::Status& error, int failures) {
  ++store_write_failures_;
  const absl::Duration backoff =
      std::min(kMaxStoreRetryBackoff, absl::Milliseconds(500) * (1 << std::min(failures - 1, 6)));
  spdlog::error(
      "job {}: the job store did not take its {} (failure {} in a row): {}; trying again in {}; "
      "check the disk under the coordinator's --state_dir",
      id, std::string(what), failures, error.ToString(), absl::FormatDuration(backoff));
  return backoff;
}

void JobService::SaveStateLocked(const std::string& id, v1::JobState state,
                                 const std::string& reason, bool counts_as_restart) {
  unsaved_.erase(id);  // a newer decision replaces one not yet saved
  absl::Status status = store_->UpdateState(id, state, reason, counts_as_restart).status();
  if (status.ok()) return;
  if (absl::IsFailedPrecondition(status) || absl::IsNotFound(status)) {
    // Not the disk: the stored job is past this state (or gone). Nothing to retry.
    spdlog::warn("job {}: not stored as {}: {}", id, v1::JobState_Name(state), status.ToString());
    return;
  }
  StoreRetry& retry = unsaved_[id];
  retry.failures = 1;
  retry.error = status.ToString();
  retry.state = state;
  retry.reason = reason;
  retry.counts_as_restart = counts_as_restart;
  retry.next_try = clock_->Now() + StoreWriteFailedLocked(id, v1::JobState_Name(state), status, 1);
}

void JobService::SaveUnsavedLocked() {
  const absl::Time now = clock_->Now();
  for (auto it = unsaved_.begin(); it != unsaved_.end();) {
    StoreRetry& retry = it->second;
    if (now < retry.next_try) {
      ++it;
      continue;
    }
    absl::Status status =
        store_->UpdateState(it->first, retry.state, retry.reason, retry.counts_as_restart).status();
    if (status.ok() || absl::IsFailedPrecondition(status) || absl::IsNotFound(status)) {
      if (status.ok()) {
        spdlog::info("job {}: the job store took its {} after {} failed writes", it->first,
                     v1::JobState_Name(retry.state), retry.failures);
        if (IsTerminalJobState(retry.state)) retire_due_ = true;
      } else {
        spdlog::warn("job {}: not stored as {}: {}", it->first, v1::JobState_Name(retry.state),
                     status.ToString());
      }
      ChangedLocked(it->first, absl::StrCat(v1::JobState_Name(retry.state), ": ", retry.reason));
      it = unsaved_.erase(it);
      continue;
    }
    retry.failures += 1;
    retry.error = status.ToString();
    retry.next_try = now + StoreWriteFailedLocked(it->first, v1::JobState_Name(retry.state), status,
                                                  retry.failures);
    ++it;
  }
}

void JobService::OverlayUnsavedLocked(v1::JobRecord& record) const {
  auto it = unsaved_.find(record.id());
  if (it == unsaved_.end()) return;
  record.set_state(it->second.state);
  record.set_reason(absl::StrCat(
      it->second.reason, " (not yet saved in the job store: ", it->second.error, "; retrying)"));
}

JobService::StoreHealth JobService::GetStoreHealth() {
  absl::MutexLock l(&mu_);
  return StoreHealth{store_write_failures_, static_cast<int>(unsaved_.size())};
}

void JobService::RetireLocked() {
  if (!retire_due_ || retained_jobs_ <= 0) return;
  retire_due_ = false;
  absl::StatusOr<std::vector<std::string>> old = store_->EndedBeyond(retained_jobs_);
  if (!old.ok()) {
    retire_due_ = true;
    return;
  }
  std::vector<std::string> gone;
  for (const std::string& id : *old) {
    if (auto e = ended_.find(id); e != ended_.end() && !e->second.AllLeft()) {
      retire_due_ = true;  // its workers are still busy with it: later
      continue;
    }
    gone.push_back(id);
  }
  if (!store_->Delete(gone).ok()) {
    retire_due_ = true;
    return;
  }
  for (const std::string& id : gone) {
    start_retries_.erase(id);
    ended_.erase(id);
    changes_.erase(id);
    quick_failures_.erase(id);
    adopted_until_.erase(id);
  }
}

absl::StatusOr<v1::DrainWorkerResponse> JobService::Drain(const TaskRef& task, bool undo) {
  v1::DrainWorkerResponse out;
  LS_ASSIGN_OR_RETURN(*out.mutable_task(), membership_->SetDraining(task, !undo));
  absl::MutexLock l(&mu_);
  if (!undo) {
    for (const auto& [id, job] : active_) {
      const int rank = job.RankOf(task);
      if (rank < 0) continue;
      v1::Assignment a;
      a.mutable_preempt()->set_job_id(id);
      a.mutable_preempt()->set_attempt(job.attempt());
      a.mutable_preempt()->set_reason(absl::StrCat(task.ToString(), " was drained"));
      PushLocked(task, job.workers()[rank].incarnation, std::move(a));
      out.set_job_id(id);
    }
  }
  ScheduleLocked();  // an undo may let a waiting job start
  return out;
}

std::map<TaskRef, std::pair<std::string, int64_t>> JobService::RunningTasks() {
  absl::MutexLock l(&mu_);
  std::map<TaskRef, std::pair<std::string, int64_t>> out;
  for (const auto& [id, job] : active_) {
    for (int rank = 0; rank < job.size(); ++rank) {
      const v1::JobReport* r = job.ReportOf(rank);
      out[job.workers()[rank].task] = {id, r == nullptr ? 0 : r->step()};
    }
  }
  for (const auto& [id, e] : evaluators_) {
    if (!e.ended) out[e.task] = {id, e.report.step()};
  }
  return out;
}

void JobService::Shutdown() {
  absl::MutexLock l(&mu_);
  shutdown_ = true;
}

void JobService::ScheduleLocked() {
  if (shutdown_ || scheduler_.empty()) return;
  const std::vector<v1::TaskStatus> tasks = membership_->Snapshot();
  const std::map<TaskRef, const v1::TaskStatus*> by_ref = ByRef(tasks);
  for (auto& [id, job] : ended_) job.ReleaseLeft(by_ref, clock_->Now());
  for (const std::string& id : scheduler_.Queue()) {
    // Its RESTARTING (or an end) is not stored yet: it starts once the store took it.
    if (unsaved_.count(id) > 0) continue;
    absl::StatusOr<v1::JobRecord> record = store_->Get(id);
    if (!record.ok() || !CanApply(JobTransition::kStartAttempt, record->state())) {
      scheduler_.Remove(id);
      continue;
    }
    if (!TryStartLocked(*record, tasks)) return;  // oldest first: the others wait behind it
    scheduler_.Remove(id);
  }
}

bool JobService::TryStartLocked(const v1::JobRecord& record,
                                const std::vector<v1::TaskStatus>& tasks) {
  const std::string& id = record.id();
  if (auto prev = ended_.find(id); prev != ended_.end() && !prev->second.AllLeft()) {
    return false;  // a restart waits until every worker left the attempt it replaces
  }
  if (auto retry = start_retries_.find(id);
      retry != start_retries_.end() && clock_->Now() < retry->second.next_try) {
    return false;  // the store did not take its last start: backing off, the others wait too
  }
  v1::JobSpec spec;
  if (!spec.ParseFromString(record.spec())) {
    SaveStateLocked(id, v1::FAILED, "the stored spec cannot be parsed");
    retire_due_ = true;
    ChangedLocked(id, "FAILED: the stored spec cannot be parsed");
    return true;
  }
  const WorkerNeed need = scheduler_.NeedFor(id, spec);
  if (clock_->Now() < need.not_before) return false;  // backing off; the others wait too
  auto busy = [this](const TaskRef& t) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsBusyLocked(t); };
  std::optional<std::vector<const v1::TaskStatus*>> chosen =
      ChooseWorkers(need.workers, tasks, busy);
  std::string shrunk;
  if (!chosen.has_value() && need.min_workers > 0 && need.workers > 0 &&
      clock_->Now() >= need.shrink_after) {
    // Elastic: no replacement came in time; go on with the workers there are.
    chosen = ChooseElastic(need.workers, need.min_workers, spec.global_batch_size(), tasks, busy,
                           spec.gpus());
    if (chosen.has_value()) {
      shrunk = absl::StrCat("; ", chosen->size(), " of ", need.workers,
                            " workers: no replacement came within "
                            "restart_policy.replacement_timeout");
    }
  }
  if (!chosen.has_value()) return false;
  const v1::TaskStatus* evaluator = nullptr;
  if (spec.evaluator().enabled()) {
    evaluator = ChooseEvaluatorLocked(tasks);
    if (evaluator == nullptr) return false;  // waits for an ALIVE, idle evaluator task
  }
  std::vector<WorkerSlot> slots;
  std::vector<std::string> names;
  std::vector<AttemptWorker> workers;
  for (const v1::TaskStatus* t : *chosen) {
    slots.push_back(WorkerSlot{RefOf(*t), t->address(), ReplicaDevices(*t, spec.gpus())});
    names.push_back(RefOf(*t).ToString());
    workers.push_back(AttemptWorker{RefOf(*t), t->incarnation()});
  }
  const int attempt = record.attempt() + 1;
  absl::StatusOr<std::vector<v1::Partition>> parts =
      MakePartitions(id, attempt, spec, slots, NewJobSecret());
  if (!parts.ok()) {
    const std::string why = std::string(parts.status().message());
    SaveStateLocked(id, v1::FAILED, why);
    retire_due_ = true;
    ChangedLocked(id, absl::StrCat("FAILED: ", why));
    return true;
  }
  for (v1::Partition& p : *parts) {
    p.set_job_uid(absl::StrCat(id, "@", record.created_unix_micros()));
    p.set_has_evaluator(evaluator != nullptr);
  }
  if (evaluator != nullptr) names.push_back(RefOf(*evaluator).ToString() + " (evaluating)");
  const std::string message =
      absl::StrCat("RUNNING on ", absl::StrJoin(names, ", "), " (attempt ", attempt, shrunk, ")");
  // RUNNING with the attempt's workers (for a restarted coordinator to re-adopt), in one
  // write: nothing is pushed to a worker before the store has it.
  std::vector<v1::AttemptWorkerRecord> stored;
  for (const AttemptWorker& w : workers) stored.push_back(RecordOf(w));
  std::optional<v1::AttemptWorkerRecord> stored_evaluator;
  if (evaluator != nullptr) {
    stored_evaluator = RecordOf(AttemptWorker{RefOf(*evaluator), evaluator->incarnation()});
  }
  absl::StatusOr<v1::JobRecord> running =
      store_->StartAttempt(id, message, std::move(stored), std::move(stored_evaluator));
  if (!running.ok()) {
    StoreRetry& retry = start_retries_[id];
    retry.failures += 1;
    retry.error = running.status().ToString();
    const absl::Duration backoff =
        StoreWriteFailedLocked(id, "start", running.status(), retry.failures);
    retry.next_try = clock_->Now() + backoff;
    ChangedLocked(
        id, absl::StrCat(v1::JobState_Name(record.state()),
                         ": the job store did not take its start (", running.status().message(),
                         "); trying again in ", absl::FormatDuration(backoff)));
    return false;  // still queued; nothing was pushed
  }
  start_retries_.erase(id);
  if (running->progress().restored_step() > 0) {
    // What the previous attempt restored; this one's chief says what it restores. Only a
    // figure shown to users: a failure to store it costs nothing else.
    v1::JobProgress progress = running->progress();
    progress.clear_restored_step();
    if (absl::Status s = store_->UpdateProgress(id, std::move(progress)).status(); !s.ok()) {
      spdlog::warn("job {}: clearing the restored step in the job store: {}", id, s.ToString());
    }
  }
  if (evaluator != nullptr) {
    // The chief's partition, as the evaluator's: the spec, the attempt's rendezvous prefix,
    // secret and job uid; no replicas, no shard.
    v1::Assignment a;
    v1::Partition& p = *a.mutable_run();
    p = (*parts)[0];
    p.set_is_chief(false);
    p.set_is_evaluator(true);
    p.mutable_task()->set_type(evaluator->task().type());
    p.mutable_task()->set_index(evaluator->task().index());
    p.set_worker_rank(-1);
    p.clear_replica_ids();
    p.set_shard_index(0);
    p.set_num_shards(0);
    const TaskRef ref = RefOf(*evaluator);
    evaluators_[id] = Evaluator{ref, evaluator->incarnation(), attempt, {}, false};
    PushLocked(ref, evaluator->incarnation(), std::move(a));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    v1::Assignment a;
    *a.mutable_run() = std::move((*parts)[i]);
    PushLocked(workers[i].task, workers[i].incarnation, std::move(a));
  }
  ended_.erase(id);
  active_.insert_or_assign(
      id, JobAttempt(id, attempt, std::move(spec), std::move(workers), clock_->Now()));
  ChangedLocked(id, message);
  return true;
}

void JobService::FailLocked(const std::string& id, const std::string& reason) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  const int max_restarts = it->second.spec().restart_policy().max_restarts();
  absl::StatusOr<v1::JobRecord> record = store_->Get(id);
  if (record.ok() && record->restarts() < max_restarts) {
    WorkerNeed need = RestartNeedLocked(it->second, it->second.size());
    // Attempts that fail soon after they start (a full disk, a bad file) back off, so that
    // the restarts are not all spent in a second: 0.5 s, 1 s, 2 s, ... up to 30 s.
    int& quick = quick_failures_[id];
    quick = clock_->Now() - it->second.started() < kQuickFailure ? quick + 1 : 0;
    if (quick > 0) {
      const absl::Duration backoff =
          std::min(kMaxRestartBackoff, absl::Milliseconds(500) * (1 << std::min(quick - 1, 6)));
      need.not_before = clock_->Now() + backoff;
      need.shrink_after = std::max(need.shrink_after, need.not_before);
    }
    EndLocked(
        id, v1::RESTARTING,
        absl::StrCat(RestartReason(reason, *record, max_restarts),
                     quick > 0 ? absl::StrCat("; backing off ",
                                              absl::FormatDuration(need.not_before - clock_->Now()),
                                              ": the attempt failed within ",
                                              absl::FormatDuration(kQuickFailure), " of its start")
                               : ""));
    // Queued like a pending job; it starts once its workers left the attempt.
    scheduler_.Enqueue(id, need);
    return;
  }
  EndLocked(
      id, v1::FAILED,
      absl::StrCat(reason, NoRestartsLeft(record.ok() ? record->restarts() : 0, max_restarts)));
}

WorkerNeed JobService::RestartNeedLocked(const JobAttempt& job, int workers) const {
  WorkerNeed need;
  need.workers = workers;
  const v1::RestartPolicy& policy = job.spec().restart_policy();
  if (policy.min_workers() > 0) {
    need.min_workers = policy.min_workers();
    const absl::Duration timeout = policy.replacement_timeout_ms() > 0
                                       ? absl::Milliseconds(policy.replacement_timeout_ms())
                                       : kDefaultReplacementTimeout;
    need.shrink_after = clock_->Now() + timeout;
  }
  return need;
}

void JobService::GrowLocked(const std::vector<v1::TaskStatus>& tasks) {
  const Schedulable workers = SchedulableWorkers(
      tasks, [this](const TaskRef& t) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsBusyLocked(t); });
  int idle = static_cast<int>(workers.idle.size());
  const int alive = static_cast<int>(workers.alive.size());
  if (idle == 0) return;
  for (auto& [id, job] : active_) {
    const v1::JobSpec& spec = job.spec();
    if (spec.restart_policy().min_workers() <= 0 || job.resize_to() > 0 ||
        job.state() != JobAttempt::State::kRunning) {
      continue;
    }
    int most = spec.restart_policy().max_workers() > 0 ? spec.restart_policy().max_workers()
               : spec.num_workers() > 0                ? spec.num_workers()
                                                       : alive;
    most = std::min(most, job.size() + idle);
    // Replicas per worker as the chief has them; a count is usable when they divide the
    // global batch.
    int per_worker = 1;
    for (const v1::TaskStatus& t : tasks) {
      if (RefOf(t) == job.workers()[0].task) per_worker = ReplicaDevices(t, spec.gpus());
    }
    int target = 0;
    for (int c = most; c > job.size(); --c) {
      if (spec.global_batch_size() % (static_cast<int64_t>(c) * per_worker) == 0) {
        target = c;
        break;
      }
    }
    if (target == 0) continue;
    job.ResizeTo(target);
    v1::Assignment a;
    a.mutable_preempt()->set_job_id(id);
    a.mutable_preempt()->set_attempt(job.attempt());
    a.mutable_preempt()->set_reason(
        absl::StrCat("growing from ", job.size(), " to ", target, " workers: idle workers joined"));
    PushLocked(job.workers()[0].task, job.workers()[0].incarnation, std::move(a));
    ChangedLocked(id, absl::StrCat("growing from ", job.size(), " to ", target, " workers"));
    idle -= target - job.size();
    if (idle <= 0) return;
  }
}

void JobService::EndLocked(const std::string& id, v1::JobState state, const std::string& reason,
                           bool counts_as_restart) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  JobAttempt& job = it->second;
  if (state != v1::SUCCEEDED) {
    AbortLocked(job, job.Unended(), reason);
    // The evaluator evaluates a succeeded job's final checkpoint; any other end stops it.
    if (auto e = evaluators_.find(id);
        e != evaluators_.end() && !e->second.ended && e->second.attempt == job.attempt()) {
      AbortLocked(job, {AttemptWorker{e->second.task, e->second.incarnation}}, reason);
    }
  }
  SaveStateLocked(id, state, reason, counts_as_restart);
  job.End(clock_->Now(), failure_grace_);
  // Everything collective of the attempt dies with it.
  if (on_attempt_ended_) on_attempt_ended_(RendezvousPrefix(id, job.attempt()) + "/");
  ended_.insert_or_assign(id, std::move(job));
  active_.erase(it);
  ChangedLocked(id, absl::StrCat(v1::JobState_Name(state), ": ", reason));
  if (IsTerminalJobState(state)) retire_due_ = true;
}

void JobService::AbortLocked(const JobAttempt& job, const std::vector<AttemptWorker>& workers,
                             const std::string& reason) {
  for (const AttemptWorker& w : workers) {
    v1::Assignment a;
    a.mutable_abort()->set_job_id(job.job_id());
    a.mutable_abort()->set_attempt(job.attempt());
    a.mutable_abort()->set_reason(reason);
    if (job.lost_rank().has_value()) {
      a.mutable_abort()->mutable_lost()->set_worker_rank(*job.lost_rank());
    }
    PushLocked(w.task, w.incarnation, std::move(a));
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

bool JobService::IsBusyLocked(const TaskRef& task) const {
  for (const auto& [id, job] : active_) {
    if (job.Holds(task)) return true;
  }
  for (const auto& [id, job] : ended_) {
    if (job.Holds(task)) return true;
  }
  for (const auto& [id, e] : evaluators_) {
    if (!e.ended && e.task == task) return true;
  }
  return false;
}

const v1::TaskStatus* JobService::ChooseEvaluatorLocked(
    const std::vector<v1::TaskStatus>& tasks) const {
  for (const v1::TaskStatus& t : tasks) {
    if (t.state() == v1::ALIVE && t.task().type() == "evaluator" && !t.draining() &&
        !IsBusyLocked(RefOf(t))) {
      return &t;
    }
  }
  return nullptr;
}

bool JobService::OnEvaluatorReportLocked(const TaskRef& task, const v1::JobReport& r) {
  auto e = evaluators_.find(r.job_id());
  if (e == evaluators_.end() || e->second.task != task || e->second.attempt != r.attempt()) {
    return false;
  }
  Evaluator& evaluator = e->second;
  if (evaluator.ended) return true;
  const bool evaluated = r.checkpoints_evaluated() > evaluator.report.checkpoints_evaluated();
  evaluator.report = r;
  if (EndsAttempt(r.phase())) {
    evaluator.ended = true;
    ChangedLocked(r.job_id(), absl::StrCat("evaluator ", task.ToString(), ": ",
                                           v1::JobReport::Phase_Name(r.phase()),
                                           r.error().empty() ? "" : absl::StrCat(": ", r.error())));
  } else if (evaluated) {
    ChangedLocked(r.job_id(), absl::StrCat("evaluator ", task.ToString(), ": step ", r.step(),
                                           ", eval accuracy ", r.eval_accuracy()));
  }
  return true;
}

void JobService::ReleaseEvaluatorsLocked(const std::map<TaskRef, const v1::TaskStatus*>& by_ref) {
  for (auto& [id, e] : evaluators_) {
    if (e.ended) continue;
    if (auto a = adopted_until_.find(id); a != adopted_until_.end() && clock_->Now() < a->second) {
      continue;  // re-adopted after a coordinator restart: still coming back
    }
    auto t = by_ref.find(e.task);
    if (t == by_ref.end() || t->second->state() != v1::ALIVE ||
        t->second->incarnation() != e.incarnation) {
      e.ended = true;
      e.report.set_phase(v1::JobReport::FAILED);
      e.report.set_error(absl::StrCat("evaluator ", e.task.ToString(), " was lost"));
      ChangedLocked(id, e.report.error());
    }
  }
}

}  // namespace coordinator
}  // namespace lockstep

// JobService, submit and queue: lowering a submitted spec into its plan (jobspec/lower.h)
// against the workers ALIVE now, storing both, GetJob/ListJobs/CancelJob, and starting the
// queued jobs oldest first (ScheduleLocked, TryStartLocked: choosing workers, partitioning,
// shipping the plan in every Partition). Thread model: job_service.h (one mutex).
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "coordinator/job_service.h"
#include "coordinator/job_service_internal.h"
#include "coordinator/partitioner.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

using job_service_internal::ByRef;
using job_service_internal::RecordOf;

jobspec::ClusterFacts JobService::FactsOf(const std::vector<v1::TaskStatus>& tasks) const {
  jobspec::ClusterFacts facts;
  for (const v1::TaskStatus& t : tasks) {
    if (t.state() != v1::ALIVE || !IsTrainingTask(t)) continue;
    jobspec::WorkerFacts w{0, 0};
    for (const v1::Device& d : t.devices())
      ++(d.kind() == v1::Device::GPU ? w.gpus : w.cpu_devices);
    facts.workers.push_back(w);
  }
  facts.heartbeat_timeout = membership_->options().heartbeat_timeout;
  facts.limits = limits_;
  return facts;
}

absl::StatusOr<v1::JobPlan> JobService::PlanOf(const v1::JobRecord& record,
                                               const v1::JobSpec& spec) const {
  v1::JobPlan plan;
  if (!record.plan().empty()) {
    if (!plan.ParseFromString(record.plan())) {
      return absl::DataLossError("the stored job plan cannot be parsed");
    }
    return jobspec::UpgradePlan(std::move(plan), spec);
  }
  // Stored by a coordinator from before plans: its spec was accepted against the workers
  // then; the spec's rules and the decisions are made now.
  jobspec::ClusterFacts facts = FactsOf({});
  facts.check_workers = false;
  absl::StatusOr<v1::JobPlan> lowered = jobspec::LowerJobSpec(spec, facts);
  if (!lowered.ok()) {
    return absl::Status(
        lowered.status().code(),
        absl::StrCat("the job was stored by a coordinator from before job plans, and its spec "
                     "does not lower now: ",
                     lowered.status().message()));
  }
  return lowered;
}

absl::StatusOr<std::string> JobService::Submit(const v1::JobSpec& spec) {
  // The spec against the workers ALIVE now: when the job's workers are not all there yet,
  // the batch split is checked again at scheduling (MakePartitions).
  LS_ASSIGN_OR_RETURN(const v1::JobPlan plan,
                      jobspec::LowerJobSpec(spec, FactsOf(membership_->Snapshot())));
  // The output directories are the workers' to check (jobspec/rules.h): nothing on this
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
  LS_ASSIGN_OR_RETURN(v1::JobRecord record, store_->Create(spec.name(), spec.SerializeAsString(),
                                                           plan.SerializeAsString()));
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
  // A job stored before plans that ended never had one: none is made up for it.
  if (!out.job().plan().empty() || !IsTerminalJobState(out.job().state())) {
    if (absl::StatusOr<v1::JobPlan> plan = PlanOf(out.job(), out.spec()); plan.ok()) {
      *out.mutable_plan() = *std::move(plan);
    }
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
  absl::StatusOr<v1::JobPlan> plan = PlanOf(record, spec);
  if (!plan.ok()) {
    const std::string why(plan.status().message());
    SaveStateLocked(id, v1::FAILED, why);
    retire_due_ = true;
    ChangedLocked(id, absl::StrCat("FAILED: ", why));
    return true;
  }
  const WorkerNeed need = scheduler_.NeedFor(id, *plan);
  if (clock_->Now() < need.not_before) return false;  // backing off; the others wait too
  auto busy = [this](const TaskRef& t) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsBusyLocked(t); };
  std::optional<std::vector<const v1::TaskStatus*>> chosen =
      ChooseWorkers(need.workers, tasks, busy);
  std::string shrunk;
  if (!chosen.has_value() && need.min_workers > 0 && need.workers > 0 &&
      clock_->Now() >= need.shrink_after) {
    // Elastic: no replacement came in time; go on with the workers there are.
    chosen = ChooseElastic(need.workers, need.min_workers, spec.global_batch_size(), tasks, busy,
                           plan->devices());
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
    slots.push_back(WorkerSlot{RefOf(*t), t->address(), ReplicasOn(*t, plan->devices())});
    names.push_back(RefOf(*t).ToString());
    workers.push_back(AttemptWorker{RefOf(*t), t->incarnation()});
  }
  const int attempt = record.attempt() + 1;
  std::optional<WorkerSlot> evaluator_slot;
  if (evaluator != nullptr) evaluator_slot = WorkerSlot{RefOf(*evaluator), evaluator->address()};
  absl::StatusOr<std::vector<v1::Partition>> parts =
      MakePartitions(id, attempt, spec, *plan, slots, NewJobSecret(), evaluator_slot);
  if (!parts.ok()) {
    const std::string why = std::string(parts.status().message());
    SaveStateLocked(id, v1::FAILED, why);
    retire_due_ = true;
    ChangedLocked(id, absl::StrCat("FAILED: ", why));
    return true;
  }
  for (v1::Partition& p : *parts) p.set_job_uid(JobUid(record));
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
    // The last partition is the evaluator's (MakePartitions).
    v1::Assignment a;
    *a.mutable_run() = std::move(parts->back());
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
  active_.insert_or_assign(id, JobAttempt(id, attempt, std::move(spec), *std::move(plan),
                                          std::move(workers), clock_->Now()));
  ChangedLocked(id, message);
  return true;
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

}  // namespace coordinator
}  // namespace lockstep

// JobExecutor's lifecycle (job_executor.h): Create's checks of the partition, the state
// machine and the report it shapes, Abort / PeerLost / Preempt and the objects they reach
// (the store, the published strategy, the evaluator's sender and link), Run with its final
// state, the diagnostics, and RunLoop's order: input, rendezvous, session, training. The
// session is built in job_executor_start.cc, the step loop is job_executor_train.cc.
#include "worker/job_executor.h"

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "jobspec/lower.h"
#include "spdlog/spdlog.h"
#include "worker/job_evaluator.h"
#include "worker/job_input.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {

const char* JobExecutor::StateName(State s) {
  switch (s) {
    case State::kCreated:
      return "CREATED";
    case State::kStarting:
      return "STARTING";
    case State::kTraining:
      return "TRAINING";
    case State::kDone:
      return "DONE";
    case State::kFailed:
      return "FAILED";
    case State::kAborted:
      return "ABORTED";
    case State::kPreempted:
      return "PREEMPTED";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<JobExecutor>> JobExecutor::Create(v1::Partition partition,
                                                                 JobExecutorOptions options) {
  if (partition.job_id().empty()) return absl::InvalidArgumentError("partition.job_id is empty");
  if (options.client == nullptr) {
    return absl::InvalidArgumentError("JobExecutorOptions.client is null");
  }
  // The spec was lowered into the partition's plan, and the attempt's rendezvous prefix
  // made, by the coordinator (jobspec/lower.h, JobService): the plan is executed as it is;
  // this only refuses a partition that carries none it can read.
  if (partition.plan().version() != jobspec::kPlanVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("partition.plan of job ", partition.job_id(), ": ",
                     partition.plan().version() == 0
                         ? "missing (the coordinator is from before job plans; upgrade it)"
                         : absl::StrCat("version ", partition.plan().version()),
                     "; this worker executes plans of version ", jobspec::kPlanVersion));
  }
  if (partition.rendezvous_prefix().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition.rendezvous_prefix is empty (job ", partition.job_id(),
                     "): the coordinator gives every attempt one; is this coordinator too old?"));
  }
  LS_RETURN_IF_ERROR(CheckPartitionGroup(partition));
  if (options.file_roots != nullptr) {
    // The spec came from a client: its files must lie inside this worker's roots.
    LS_RETURN_IF_ERROR(options.file_roots->ResolveSpec(partition.mutable_spec()));
  }
  return std::unique_ptr<JobExecutor>(new JobExecutor(std::move(partition), std::move(options)));
}

JobExecutor::JobExecutor(v1::Partition partition, JobExecutorOptions options)
    : partition_(std::move(partition)),
      options_(std::move(options)),
      owned_clock_(options_.clock == nullptr ? std::make_unique<RealClock>() : nullptr),
      clock_(options_.clock != nullptr ? options_.clock : owned_clock_.get()),
      store_(std::make_unique<CoordinatorStore>(options_.client, partition_.rendezvous_prefix(),
                                                clock_)),
      recorder_(partition_.job_id(), partition_.attempt(), WorkerRank(partition_), clock_),
      observers_({options_.metrics, &recorder_}),
      log_(clock_) {
  report_.set_job_id(partition_.job_id());
  report_.set_attempt(partition_.attempt());
  report_.set_phase(v1::JobReport::STARTING);
  report_.set_eval_accuracy(-1);
}

JobExecutor::~JobExecutor() = default;

std::string JobExecutor::Who() const {
  return absl::StrCat("job ", partition_.job_id(), " attempt ", partition_.attempt(),
                      " worker rank ", WorkerRank(partition_));
}

void JobExecutor::SetState(State next, const std::string& error) {
  if (state_ == State::kDone || state_ == State::kFailed || state_ == State::kAborted ||
      state_ == State::kPreempted) {
    return;
  }
  Log(absl::StrCat(StateName(state_), " -> ", StateName(next), error.empty() ? "" : ": ", error));
  if (next != State::kStarting && next != State::kTraining) {
    recorder_.SetPhase(v1::PHASE_FINISHED, -1);
  }
  state_ = next;
  switch (next) {
    case State::kStarting:
      report_.set_phase(v1::JobReport::STARTING);
      break;
    case State::kTraining:
      report_.set_phase(v1::JobReport::TRAINING);
      break;
    case State::kDone:
      report_.set_phase(v1::JobReport::DONE);
      break;
    case State::kFailed:
      report_.set_phase(v1::JobReport::FAILED);
      break;
    case State::kAborted:
      report_.set_phase(v1::JobReport::ABORTED);
      break;
    case State::kPreempted:
      report_.set_phase(v1::JobReport::PREEMPTED);
      break;
    case State::kCreated:
      break;
  }
  if (!error.empty()) report_.set_error(error);
}

JobExecutor::State JobExecutor::state() const {
  absl::MutexLock l(&mu_);
  return state_;
}

v1::JobReport JobExecutor::report() const {
  absl::MutexLock l(&mu_);
  return report_;
}

void JobExecutor::Log(const std::string& line) {
  spdlog::info("{}: {}", Who(), line);
  log_.Add(line);
}

v1::JobDiagnostics JobExecutor::diagnostics() const {
  v1::JobDiagnostics d;
  d.set_job_id(partition_.job_id());
  d.set_attempt(partition_.attempt());
  *d.mutable_record() = recorder_.Snapshot();
  for (v1::LogLine& line : log_.Pending()) *d.add_log_lines() = std::move(line);
  d.set_finished(d.record().phase() == v1::PHASE_FINISHED);
  return d;
}

absl::Status JobExecutor::StallUntilAborted(const std::string& where) {
  Log(absl::StrCat("test hook (LOCKSTEP_TEST_HOOKS): stalling ", where, " until aborted"));
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(&abort_requested_));
  return absl::AbortedError(abort_reason_);
}

absl::Status JobExecutor::EnterPhase(v1::TrainPhase phase, int64_t step) {
  recorder_.SetPhase(phase, step);
  if (options_.test_hooks.StallsAt(phase, step)) {
    return StallUntilAborted(absl::StrCat("in ", v1::TrainPhase_Name(phase), " of step ", step));
  }
  return absl::OkStatus();
}

bool JobExecutor::aborted() const {
  absl::MutexLock l(&mu_);
  return abort_requested_;
}

void JobExecutor::Abort(const std::string& reason) { AbortFor(reason, std::nullopt); }

void JobExecutor::PeerLost(int rank, const std::string& reason) { AbortFor(reason, rank); }

void JobExecutor::AbortFor(const std::string& reason, std::optional<int> lost_rank) {
  absl::MutexLock l(&mu_);
  if (abort_requested_) return;
  abort_requested_ = true;
  abort_reason_ = reason;
  spdlog::info("{}: aborting: {}", Who(), reason);
  log_.Add(absl::StrCat("aborting: ", reason));
  store_->Abort();
  if (strategy_ != nullptr) {
    // A peer loss reaches the collectives as such, so that they name the lost rank.
    if (lost_rank.has_value()) {
      strategy_->PeerLost(*lost_rank, reason);
    } else {
      strategy_->Abort();
    }
  }
  if (eval_sender_ != nullptr) eval_sender_->Abort();
  if (eval_link_ != nullptr) eval_link_->Abort();
  if (state_ == State::kCreated) SetState(State::kAborted, absl::StrCat("aborted: ", reason));
}

void JobExecutor::Preempt(const std::string& reason) {
  bool abort = false;
  {
    absl::MutexLock l(&mu_);
    if (!preemption_.empty()) return;
    preemption_ = reason;
    report_.set_preemption(reason);
    spdlog::info("{}: preempted ({}): the group stops after the next step, with a checkpoint",
                 Who(), reason);
    abort = state_ == State::kCreated;  // Run() never started: nothing to checkpoint
  }
  if (abort) Abort(reason);
  preempt_requested_.store(true);
}

absl::Status JobExecutor::Publish(distribute::Strategy* strategy) {
  absl::MutexLock l(&mu_);
  strategy_ = strategy;
  if (abort_requested_ && strategy != nullptr) {
    strategy->Abort();
    return absl::AbortedError(abort_reason_);
  }
  return absl::OkStatus();
}

absl::Status JobExecutor::PublishSender(CheckpointSender* sender) {
  absl::MutexLock l(&mu_);
  eval_sender_ = sender;
  if (abort_requested_ && sender != nullptr) {
    sender->Abort();
    return absl::AbortedError(abort_reason_);
  }
  return absl::OkStatus();
}

absl::Status JobExecutor::PublishLink(EvalLink* link) {
  absl::MutexLock l(&mu_);
  eval_link_ = link;
  if (link == nullptr) return absl::OkStatus();
  if (abort_requested_) {
    link->Abort();
    return absl::AbortedError(abort_reason_);
  }
  SetState(State::kTraining, "");
  return absl::OkStatus();
}

EvalLinkOptions JobExecutor::LinkOptions() const {
  EvalLinkOptions o;
  o.transport = options_.transport;
  o.listen_host = options_.listen_host;
  o.connect_timeout = options_.rendezvous_timeout;
  return o;
}

absl::Status JobExecutor::RunAsEvaluator() {
  EvaluatorHooks hooks;
  hooks.update_report = [this](const std::function<void(v1::JobReport&)>& fn) { UpdateReport(fn); };
  hooks.publish = [this](EvalLink* link) { return PublishLink(link); };
  return RunEvaluator(partition_, store_.get(), LinkOptions(), clock_, hooks);
}

v1::JobReport JobExecutor::Run() {
  {
    absl::MutexLock l(&mu_);
    if (state_ != State::kCreated) {
      v1::JobReport r = report_;
      if (state_ != State::kAborted) {
        r.set_error(absl::StrCat(Who(), ": Run() called twice (FAILED_PRECONDITION)"));
      }
      return r;
    }
    SetState(State::kStarting, "");
  }
  absl::Status s = RunLoop();
  absl::MutexLock l(&mu_);
  strategy_ = nullptr;
  if (s.ok() && stopped_after_ >= 0) {
    SetState(State::kPreempted,
             preemption_.empty()
                 ? absl::StrCat(Who(), ": stopped after step ", stopped_after_,
                                " with its group (another worker was preempted); checkpoint "
                                "written")
                 : absl::StrCat(Who(), ": preempted (", preemption_, "); stopped after step ",
                                stopped_after_, " with its group; checkpoint written"));
  } else if (s.ok()) {
    SetState(State::kDone, "");
  } else if (abort_requested_) {
    SetState(State::kAborted, absl::StrCat(Who(), ": aborted: ", abort_reason_));
  } else {
    SetState(State::kFailed, absl::StrCat(Who(), ": ", s.message()));
  }
  return report_;
}

absl::Status JobExecutor::Rendezvous() {
  if (NumWorkers(partition_) <= 1) return absl::OkStatus();
  // An abortable barrier first: the transports' connect and accept loops only end at their
  // deadline, while the store's waits end at Abort(). Once every worker is here, connecting
  // takes milliseconds, so an abort during start-up is honoured in time.
  LS_RETURN_IF_ERROR(store_->Set(absl::StrCat("ready/", WorkerRank(partition_)), "ready"));
  const absl::Time deadline = clock_->Now() + options_.rendezvous_timeout;
  for (int r = 0; r < NumWorkers(partition_); ++r) {
    absl::StatusOr<std::string> ready = store_->Get(absl::StrCat("ready/", r), deadline);
    if (!ready.ok()) {
      return Annotate(ready.status(),
                      absl::StrCat("waiting for worker rank ", r, " of ", NumWorkers(partition_),
                                   " to join (is it alive?)"));
    }
  }
  return absl::OkStatus();
}

absl::Status JobExecutor::RunLoop() {
  if (IsEvaluator(partition_)) return RunAsEvaluator();
  const v1::JobSpec& spec = partition_.spec();
  // Input first: a local error (a missing file) shows before peers wait on us.
  LS_ASSIGN_OR_RETURN(JobInput input, BuildJobInput(spec, partition_.plan().input()));
  LS_ASSIGN_OR_RETURN(const int64_t total_steps, TotalSteps(spec, input));
  UpdateReport([&](v1::JobReport& r) { r.set_total_steps(total_steps); });
  LS_RETURN_IF_ERROR(Rendezvous());
  // The session outlives `unpublish`, so the strategy StartSession publishes for Abort() is
  // unregistered before it is destroyed, whatever happens below.
  auto session = std::make_unique<Session>();
  struct Unpublish {
    JobExecutor* self;
    ~Unpublish() {
      self->Publish(nullptr).IgnoreError();
      self->PublishSender(nullptr).IgnoreError();
    }
  } unpublish{this};
  LS_RETURN_IF_ERROR(StartSession(input, session.get()));
  UpdateReport([&](v1::JobReport& r) {
    r.set_restored_step(session->restored.step);
    r.set_restored_from(session->restored.from);
    r.set_step(session->restored.step);
    r.set_summary_dir(session->chief->summary_dir());
  });
  return Train(*session, input, total_steps);
}

}  // namespace worker
}  // namespace lockstep

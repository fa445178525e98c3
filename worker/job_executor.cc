#include "worker/job_executor.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "distribute/tensor_math.h"
#include "distribute/trainer.h"
#include "engine/executor.h"
#include "engine/model_builder.h"
#include "jobspec/lower.h"
#include "spdlog/spdlog.h"
#include "worker/chief/event_writer.h"
#include "worker/init_from.h"
#include "worker/job_chief.h"
#include "worker/job_evaluator.h"
#include "worker/job_input.h"
#include "worker/job_restore.h"
#include "worker/job_strategy.h"
#include "worker/metrics_window.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {
namespace {

namespace tags = chief::summary_tags;

// Evaluates the first local replica's variables on `element`.
absl::StatusOr<engine::StepResult> Evaluate(engine::Executor& executor,
                                            const distribute::Trainer& trainer,
                                            const engine::Tensor& features,
                                            const engine::Tensor& labels) {
  // On the host: the evaluation executor runs on the CPU (a GPU replica's copy comes back).
  LS_ASSIGN_OR_RETURN(std::vector<engine::Tensor> vars, trainer.HostVariables());
  return executor.Evaluate(vars, {{"features", features}, {"labels", labels}});
}

// The accuracy of the updated weights on this worker's last batch: every local replica's
// rows, weighted by their number (the first replica alone would see 1/replicas of them).
// One forward pass per local replica, every summary window, on the host (a GPU replica's
// batch, staged on its device by the input pipeline, is copied back). -1 when the model has
// no accuracy.
absl::StatusOr<double> LocalTrainAccuracy(engine::Executor& executor,
                                          distribute::Strategy& strategy,
                                          const distribute::Trainer& trainer,
                                          const std::vector<distribute::DistributedValues>& batch) {
  const std::vector<engine::Tensor> features = strategy.ExperimentalLocalResults(batch[0]);
  const std::vector<engine::Tensor> labels = strategy.ExperimentalLocalResults(batch[1]);
  double correct = 0;
  int64_t examples = 0;
  for (size_t r = 0; r < features.size(); ++r) {
    if (labels[r].num_elements() == 0) continue;
    LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu,
                        strategy.extended().replica_gpu(static_cast<int>(r)));
    LS_ASSIGN_OR_RETURN(engine::Tensor x, distribute::ToHost(features[r], gpu));
    LS_ASSIGN_OR_RETURN(engine::Tensor y, distribute::ToHost(labels[r], gpu));
    LS_ASSIGN_OR_RETURN(engine::StepResult result, Evaluate(executor, trainer, x, y));
    if (result.accuracy < 0) return -1.0;  // the graph computes no accuracy
    correct += result.accuracy * result.batch_size;
    examples += result.batch_size;
  }
  return examples > 0 ? correct / examples : 0.0;
}

// The size of the file at `path` (a checkpoint just written), 0 when it cannot be read.
int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

}  // namespace

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

// Micro-batches per step (optimizer.gradient_accumulation_steps).
static int64_t BatchesPerStep(const v1::JobSpec& spec) {
  return std::max(1, spec.optimizer().gradient_accumulation_steps());
}

// The job's steps: `steps`, or `epochs` of the training set.
static absl::StatusOr<int64_t> TotalSteps(const v1::JobSpec& spec, const JobInput& input) {
  if (spec.steps() > 0) return spec.steps();
  const int64_t per_step = spec.global_batch_size() * BatchesPerStep(spec);
  if (input.train_examples < per_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epochs: the training set's size is unknown or smaller than one step's batch (",
        input.train_examples, " examples, a step takes ", per_step, "); give steps instead"));
  }
  return spec.epochs() * (input.train_examples / per_step);
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

absl::Status JobExecutor::StartSession(const JobInput& input, Session* session) {
  const v1::JobSpec& spec = partition_.spec();
  LS_ASSIGN_OR_RETURN(session->graph, engine::BuildModel(spec.model()));
  std::vector<size_t> gradient_sizes;
  for (const engine::VariableInfo& v : session->graph.Variables()) {
    if (v.trainable) gradient_sizes.push_back(v.shape.num_elements() * DTypeSize(v.dtype));
  }
  JobStrategyOptions so;
  so.shm_heap_bytes =
      partition_.plan().communication().shm_heap() ? ShmHeapBytes(gradient_sizes) : 0;
  so.devices = options_.devices;
  so.nccl = options_.nccl;
  so.store = store_.get();
  so.transport = options_.transport;
  so.listen_host = options_.listen_host;
  so.data_port = options_.data_port;
  so.connect_timeout = options_.rendezvous_timeout;
  so.observer = options_.metrics;
  so.cross_worker_observer = &observers_;
  absl::StatusOr<std::unique_ptr<distribute::Strategy>> strategy = MakeJobStrategy(partition_, so);
  if (!strategy.ok()) return Annotate(strategy.status(), "joining the job's group");
  session->strategy = std::move(*strategy);
  LS_RETURN_IF_ERROR(Publish(session->strategy.get()));
  LS_ASSIGN_OR_RETURN(session->device_memory, JobDeviceMemory::Start(*session->strategy));
  distribute::TrainerOptions to;
  to.optimizer = spec.optimizer();
  to.global_batch_size = spec.global_batch_size();
  to.overlap_all_reduce = options_.overlap_all_reduce;
  to.on_phase = [this](distribute::StepPhase p) {
    recorder_.SetPhase(p == distribute::StepPhase::kCompute     ? v1::PHASE_COMPUTE
                       : p == distribute::StepPhase::kAllReduce ? v1::PHASE_ALL_REDUCE
                                                                : v1::PHASE_APPLY,
                       -1);
  };
  {
    distribute::StrategyScope scope = session->strategy->Scope();
    absl::StatusOr<std::unique_ptr<distribute::Trainer>> t =
        distribute::Trainer::Create(session->strategy.get(), &session->graph, to);
    if (!t.ok()) return Annotate(t.status(), "creating variables (chief's broadcast)");
    session->trainer = std::move(*t);
  }
  absl::StatusOr<Restored> restored =
      RestoreAttempt(partition_, options_.state_dir, *store_, *session->strategy, *session->trainer,
                     clock_->Now() + options_.rendezvous_timeout);
  if (!restored.ok()) return Annotate(restored.status(), "restoring the newest checkpoint");
  session->restored = *std::move(restored);
  if (session->restored.step == 0 && spec.has_init_from()) {
    absl::Status init = ApplyInitFrom(spec.init_from(), *session->trainer);
    if (!init.ok()) return Annotate(init, "starting from exported weights");
  }
  distribute::DistributeOptions dopts;
  dopts.auto_shard_policy = input.policy;
  dopts.start_step = session->restored.iterator_steps;
  dopts.prefetch_to_device = options_.prefetch_to_device;
  LS_ASSIGN_OR_RETURN(session->dataset, session->strategy->ExperimentalDistributeDataset(
                                            input.train, spec.global_batch_size(), dopts));
  LS_ASSIGN_OR_RETURN(session->evaluator, engine::Executor::Create(&session->graph));
  LS_ASSIGN_OR_RETURN(session->chief, JobChief::Create(partition_, clock_, options_.state_dir,
                                                       options_.retained_checkpoint_copies));
  if (IsChief(partition_) && HasEvaluator(partition_)) {
    const absl::Duration timeout =
        absl::Milliseconds(partition_.plan().communication().timeout_ms());
    session->eval_sender = std::make_unique<CheckpointSender>(
        partition_,
        std::make_unique<CoordinatorStore>(options_.client, partition_.rendezvous_prefix(), clock_),
        LinkOptions(), timeout);
    LS_RETURN_IF_ERROR(PublishSender(session->eval_sender.get()));
    session->chief->set_evaluator(session->eval_sender.get());
  }
  // Epochs as this worker's pipeline makes them (the last partial batch of each dropped).
  const distribute::Strategy& st = *session->strategy;
  session->epoch =
      TrainEpochOf(input, session->dataset->shard_plan().spec,
                   spec.global_batch_size() / st.num_replicas_in_sync() * st.num_local_replicas());
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

absl::Status JobExecutor::Train(Session& s, const JobInput& input, int64_t total_steps) {
  const v1::JobSpec& spec = partition_.spec();
  const v1::JobPlan& plan = partition_.plan();
  const int64_t summary_every = plan.summary_every_steps();
  const int64_t batches_per_step = BatchesPerStep(spec);
  auto checkpoint = [&](int64_t step) -> absl::Status {
    recorder_.SetPhase(v1::PHASE_CHECKPOINT, step);
    const absl::Time started = clock_->Now();
    LS_ASSIGN_OR_RETURN(std::string path,
                        s.chief->SaveCheckpoint(step, *s.trainer,
                                                DataPositionAfter(step * batches_per_step, s.epoch,
                                                                  s.dataset->steps_returned())));
    if (!path.empty()) {
      UpdateReport([&](v1::JobReport& r) { r.set_checkpoint_path(path); });
      Log(absl::StrCat("step ", step, ": checkpoint ", path));
    }
    if (options_.metrics != nullptr && !path.empty()) {
      options_.metrics->CheckpointWritten(clock_->Now() - started, FileBytes(path));
    }
    return absl::OkStatus();
  };
  auto evaluate = [&](int64_t step) -> absl::Status {
    if (!input.eval.has_value()) return absl::OkStatus();
    recorder_.SetPhase(v1::PHASE_EVALUATE, step);
    LS_ASSIGN_OR_RETURN(engine::StepResult r, Evaluate(*s.evaluator, *s.trainer,
                                                       input.eval->features, input.eval->labels));
    UpdateReport([&](v1::JobReport& rep) { rep.set_eval_accuracy(r.accuracy); });
    LS_RETURN_IF_ERROR(s.chief->AddScalars(step, {{std::string(tags::kEvalAccuracy), r.accuracy},
                                                  {std::string(tags::kEvalLoss), r.loss}}));
    return absl::OkStatus();
  };
  {
    absl::MutexLock l(&mu_);
    SetState(State::kTraining, "");
  }
  const distribute::CrossDeviceOps& ops = s.strategy->extended().cross_device_ops();
  MetricsWindow window(spec.global_batch_size() * batches_per_step, clock_->Now(),
                       ops.GradientAllReduceStats().totals);
  Log(absl::StrCat("training steps ", s.restored.step + 1, " to ", total_steps, " as worker rank ",
                   WorkerRank(partition_), " of ", NumWorkers(partition_)));
  for (int64_t step = s.restored.step + 1; step <= total_steps; ++step) {
    if (aborted()) return absl::AbortedError("aborted");
    LS_RETURN_IF_ERROR(EnterPhase(v1::PHASE_INPUT, step));
    std::vector<std::vector<distribute::DistributedValues>> micro;
    const absl::Time input_started = clock_->Now();
    for (int64_t m = 0; m < batches_per_step; ++m) {
      LS_ASSIGN_OR_RETURN(auto next, s.dataset->Next());
      if (!next.has_value()) {
        return absl::InternalError(absl::StrCat("the input ended before step ", step));
      }
      micro.push_back(*std::move(next));
    }
    const absl::Duration input_wait = clock_->Now() - input_started;
    const absl::Time compute_start = clock_->Now();
    LS_RETURN_IF_ERROR(EnterPhase(v1::PHASE_COMPUTE, step));
    if (options_.test_hooks.slow_compute > absl::ZeroDuration()) {
      clock_->SleepUntil(compute_start + options_.test_hooks.slow_compute);
    }
    const absl::Duration hooked = clock_->Now() - compute_start;
    absl::StatusOr<distribute::TrainStepResult> r =
        s.trainer->Step(absl::MakeConstSpan(micro), preempt_requested_.load());
    if (!r.ok()) return Annotate(r.status(), absl::StrCat("step ", step));
    r->times.input_wait = input_wait;
    recorder_.EndStep(hooked + r->times.compute, hooked + r->times.total);
    recorder_.SetPhase(v1::PHASE_EVALUATE, step);
    if (options_.on_step) options_.on_step(step, *r);
    if (options_.metrics != nullptr) options_.metrics->StepDone(*r, input_wait);
    window.Add(*r);
    const bool last = step == total_steps;
    if (step % summary_every == 0 || last) {
      LS_ASSIGN_OR_RETURN(const double train_accuracy,
                          LocalTrainAccuracy(*s.evaluator, *s.strategy, *s.trainer, micro.back()));
      WindowSummary summary = window.Close(step, clock_->Now(), ops.GradientAllReduceStats(),
                                           s.trainer->optimizer().learning_rate(), train_accuracy);
      summary.device_memory = s.device_memory.Read();
      if (options_.metrics != nullptr) {
        options_.metrics->WindowClosed(summary.examples_per_sec);
        for (const v1::DeviceMemory& m : summary.device_memory) {
          options_.metrics->DeviceMemory(m.device(), m.peak_bytes(), m.reserved_bytes());
        }
      }
      UpdateReport([&](v1::JobReport& rep) {
        summary.ApplyTo(&rep);
        if (s.epoch.steps_per_epoch > 0) {
          rep.set_epoch(step * batches_per_step / s.epoch.steps_per_epoch);
        }
      });
      LS_RETURN_IF_ERROR(s.chief->AddScalars(step, summary.Scalars()));
      Log(absl::StrFormat("step %d/%d loss %.4f, %.0f examples/s, %.2f ms per step (compute %.2f)",
                          step, total_steps, summary.loss, summary.examples_per_sec,
                          summary.step_ms, summary.compute_ms));
    } else {
      UpdateReport([&](v1::JobReport& rep) { rep.set_step(step); });
    }
    if (spec.eval_every_steps() > 0 && step % spec.eval_every_steps() == 0 && !last) {
      LS_RETURN_IF_ERROR(evaluate(step));
    }
    const bool checkpointed =
        plan.checkpoint().every_steps() > 0 && step % plan.checkpoint().every_steps() == 0;
    if (checkpointed && !last) LS_RETURN_IF_ERROR(checkpoint(step));
    if (r->stop && !last) {
      // Every worker of the group learnt it after this same step: each writes its copy.
      if (!checkpointed) LS_RETURN_IF_ERROR(checkpoint(step));
      LS_RETURN_IF_ERROR(s.chief->Flush());
      stopped_after_ = step;
      return absl::OkStatus();
    }
  }
  LS_RETURN_IF_ERROR(evaluate(total_steps));
  LS_RETURN_IF_ERROR(checkpoint(total_steps));
  LS_RETURN_IF_ERROR(s.chief->Flush());
  if (s.eval_sender != nullptr) {
    // The evaluator is a side-car: its trouble is logged (by the sender), not the job's.
    const absl::Status sent = s.eval_sender->Finish(clock_->Now() + options_.rendezvous_timeout);
    if (!sent.ok())
      spdlog::warn("{}: the evaluator may miss checkpoints: {}", Who(), sent.ToString());
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace lockstep

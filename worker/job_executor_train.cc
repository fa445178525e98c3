// JobExecutor::Train (job_executor.h): the step loop and its cadences. Each step draws its
// micro-batches, runs Trainer::Step (which carries a preemption request to the group) and
// feeds the metrics; every summary window (plan.summary_every_steps) closes a MetricsWindow
// into the report, the chief's scalars and the job's log; evaluation every
// eval_every_steps and at the end; checkpoints every plan.checkpoint.every_steps, at the end
// and at a preemption's stop; then the chief's flush and the evaluator's last checkpoint.
#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "distribute/tensor_math.h"
#include "distribute/trainer.h"
#include "engine/executor.h"
#include "spdlog/spdlog.h"
#include "worker/chief/event_writer.h"
#include "worker/job_chief.h"
#include "worker/job_executor.h"
#include "worker/job_input.h"
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

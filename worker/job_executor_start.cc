// JobExecutor::StartSession (job_executor.h): what one run trains with, built once after the
// rendezvous. The model's graph; the strategy for the partition (job_strategy.h), published
// for Abort(); the trainer, whose creation broadcasts the chief's variables; the restore of
// a restart (job_restore.h) or the spec's init_from; the distributed input pipeline; the
// evaluation executor; the chief's writers (JobChief) and, with an evaluator task, its
// checkpoint sender.
#include <memory>
#include <utility>
#include <vector>

#include "common/status.h"
#include "distribute/trainer.h"
#include "engine/executor.h"
#include "engine/model_builder.h"
#include "worker/init_from.h"
#include "worker/job_chief.h"
#include "worker/job_executor.h"
#include "worker/job_input.h"
#include "worker/job_restore.h"
#include "worker/job_strategy.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {

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

}  // namespace worker
}  // namespace lockstep

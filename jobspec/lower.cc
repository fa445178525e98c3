#include "jobspec/lower.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "distribute/communication_backend.h"

namespace lockstep {
namespace jobspec {
namespace {

// Defaults of the spec's "0 = ..." fields.
constexpr int64_t kDefaultBytesPerPack = int64_t{4} << 20;  // communication.bytes_per_pack
constexpr int64_t kDefaultTimeoutMs = 60000;                // communication.timeout_ms
constexpr int kDefaultKeep = 5;                             // checkpoint.keep
constexpr int64_t kDefaultSummaryEverySteps = 10;           // summaries.every_steps
constexpr int64_t kDefaultReplacementTimeoutMs = 10000;     // restart_policy.replacement_timeout_ms

// Replicas one worker runs for the job: its devices of the job's kind (at least 1).
int ReplicasOn(const WorkerFacts& w, bool gpus) {
  return std::max(1, gpus ? w.gpus : w.cpu_devices);
}

// The workers the job would get now (WorkersNeeded of them, when that many are there).
std::vector<int> SlotsNow(const v1::JobSpec& spec, const ClusterFacts& cluster, bool* known) {
  std::vector<int> slots;
  for (const WorkerFacts& w : cluster.workers) slots.push_back(ReplicasOn(w, spec.gpus()));
  const int needed = WorkersNeeded(spec);
  if (needed > 0 && static_cast<int>(slots.size()) >= needed) slots.resize(needed);
  *known = needed == 0 ? !slots.empty() : static_cast<int>(slots.size()) == needed;
  return slots;
}

int64_t CountReplicas(const v1::JobSpec& spec, const std::vector<int>& slots) {
  if (EffectiveStrategy(spec) == v1::ONE_DEVICE) return slots.empty() ? 0 : 1;
  int64_t n = 0;
  for (int s : slots) n += s;
  return n;
}

// restart_policy, its defaults filled: the most workers an elastic job grows to (max_workers,
// else num_workers, else 0: every ALIVE training worker) and the replacement timeout.
v1::RestartPlan DecideRestart(const v1::JobSpec& spec) {
  const v1::RestartPolicy& policy = spec.restart_policy();
  v1::RestartPlan plan;
  plan.set_max_restarts(policy.max_restarts());
  plan.set_min_workers(policy.min_workers());
  plan.set_max_workers(policy.max_workers() > 0 ? policy.max_workers() : spec.num_workers());
  plan.set_replacement_timeout_ms(policy.replacement_timeout_ms() > 0
                                      ? policy.replacement_timeout_ms()
                                      : kDefaultReplacementTimeoutMs);
  return plan;
}

// An elastic restart policy (min_workers > 0): the replacement timeout against the
// heartbeat timeout, and some worker count in the range splitting the global batch.
absl::Status CheckElastic(const v1::JobSpec& spec, const ClusterFacts& cluster,
                          const std::vector<int>& slots) {
  const v1::RestartPolicy& policy = spec.restart_policy();
  if (policy.min_workers() <= 0) return absl::OkStatus();
  if (policy.replacement_timeout_ms() > 0 &&
      absl::Milliseconds(policy.replacement_timeout_ms()) < cluster.heartbeat_timeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("restart_policy.replacement_timeout_ms: ", policy.replacement_timeout_ms(),
                     " is shorter than the coordinator's heartbeat timeout (",
                     absl::FormatDuration(cluster.heartbeat_timeout),
                     "): a lost worker is not even known to be lost by then"));
  }
  const int per_worker = slots.empty() ? 1 : slots[0];
  const int planned = DecideRestart(spec).max_workers();
  const int most = planned > 0 ? planned : std::max<int>(slots.size(), policy.min_workers());
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

// GPU replicas need a worker that offers GPUs; communication.implementation must suit the
// replicas' kind (ResolveBackend). A worker offers GPUs only when built with CUDA, so the
// build is taken to have it; each worker checks that fact of its own build.
absl::StatusOr<v1::CommunicationPlan::Backend> DecideBackend(const v1::JobSpec& spec,
                                                             const ClusterFacts& cluster) {
  bool offered = false;
  for (const WorkerFacts& w : cluster.workers) offered = offered || w.gpus > 0;
  const std::string how = absl::StrCat(
      "none of the ", cluster.workers.size(),
      " ALIVE training worker(s) offers a GPU (`lockstep status` lists their devices); start "
      "lockstepd built with --config=cuda on GPU hosts (--gpus)");
  if (spec.gpus() && !offered && cluster.check_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus: the job asks for GPU replicas, but ", how));
  }
  distribute::BackendQuery query;
  query.implementation = distribute::ImplementationFromSpec(spec.communication().implementation());
  query.replicas = spec.gpus() ? distribute::ReplicaKind::kGpu : distribute::ReplicaKind::kCpu;
  query.built_with_cuda = true;
  absl::StatusOr<distribute::CollectiveBackend> backend = distribute::ResolveBackend(query);
  if (!backend.ok()) {
    std::string message(backend.status().message());
    if (!spec.gpus()) {
      absl::StrAppend(&message, " (the job's replicas are CPU devices: set `gpus: true` for GPUs",
                      offered ? "" : absl::StrCat("; ", how), ")");
    }
    return absl::InvalidArgumentError(message);
  }
  if (*backend == distribute::CollectiveBackend::kNccl) return v1::CommunicationPlan::NCCL;
  return query.implementation == distribute::Implementation::kRing
             ? v1::CommunicationPlan::LOCKSTEP_RING
             : v1::CommunicationPlan::LOCKSTEP;
}

}  // namespace

ClusterFacts ClusterFacts::OneWorker(int devices, bool gpus) {
  ClusterFacts facts;
  WorkerFacts w;
  (gpus ? w.gpus : w.cpu_devices) = devices;
  facts.workers.push_back(w);
  return facts;
}

absl::StatusOr<v1::JobPlan> LowerJobSpec(const v1::JobSpec& spec, const ClusterFacts& cluster) {
  LS_RETURN_IF_ERROR(CheckSpecRules(spec));
  // The batch must split over the replicas of the workers the job would get now; when
  // they are not known yet the partitioner checks it at scheduling.
  bool known = false;
  const std::vector<int> slots = SlotsNow(spec, cluster, &known);
  known = known && cluster.check_workers;
  const int64_t replicas = known ? CountReplicas(spec, slots) : 1;
  if (known) LS_RETURN_IF_ERROR(CheckBatchDivisible(spec, replicas));
  // With no workers known yet, one replica would hold the whole batch.
  LS_RETURN_IF_ERROR(CheckModelSize(spec, cluster.limits, replicas));
  LS_RETURN_IF_ERROR(CheckElastic(spec, cluster, slots));
  LS_ASSIGN_OR_RETURN(const v1::CommunicationPlan::Backend backend, DecideBackend(spec, cluster));

  v1::JobPlan plan;
  plan.set_version(kPlanVersion);
  plan.set_strategy(EffectiveStrategy(spec));
  plan.set_workers(WorkersNeeded(spec));
  v1::DevicePlan& devices = *plan.mutable_devices();
  devices.set_kind(spec.gpus() ? v1::DevicePlan::GPU : v1::DevicePlan::CPU);
  devices.set_per_worker(plan.strategy() == v1::ONE_DEVICE ? 1 : 0);

  const v1::CommunicationSpec& c = spec.communication();
  v1::CommunicationPlan& comm = *plan.mutable_communication();
  comm.set_backend(backend);
  comm.set_bytes_per_pack(c.bytes_per_pack() > 0 ? c.bytes_per_pack() : kDefaultBytesPerPack);
  comm.set_timeout_ms(c.timeout_ms() > 0 ? c.timeout_ms() : kDefaultTimeoutMs);
  comm.set_hierarchical(!c.flat());
  comm.set_encrypt(c.encrypt());
  comm.set_bf16_compression(c.compression() == v1::CommunicationSpec::BF16);
  comm.set_shm_heap(!c.disable_shm_heap());

  const v1::DataSpec& data = spec.data();
  v1::InputPlan& input = *plan.mutable_input();
  if (data.has_eval()) {
    input.set_eval(v1::InputPlan::SOURCE);
  } else if (data.eval_fraction() > 0) {
    input.set_eval(v1::InputPlan::HELD_OUT);
    input.set_eval_fraction(data.eval_fraction());
  } else {
    input.set_eval(v1::InputPlan::NONE);
  }
  input.set_auto_shard_policy(data.auto_shard_policy() == v1::AUTO_SHARD_POLICY_UNSPECIFIED
                                  ? v1::AUTO
                                  : data.auto_shard_policy());
  input.set_shuffle(!data.no_shuffle());

  const v1::CheckpointSpec& ckpt = spec.checkpoint();
  plan.mutable_checkpoint()->set_every_steps(ckpt.every_steps());
  plan.mutable_checkpoint()->set_keep(ckpt.keep() > 0 ? ckpt.keep() : kDefaultKeep);
  plan.mutable_checkpoint()->set_copies(ckpt.copies());
  plan.set_summary_every_steps(spec.summaries().every_steps() > 0 ? spec.summaries().every_steps()
                                                                  : kDefaultSummaryEverySteps);
  *plan.mutable_restart() = DecideRestart(spec);
  return plan;
}

absl::StatusOr<v1::JobPlan> UpgradePlan(v1::JobPlan stored, const v1::JobSpec& spec) {
  if (stored.version() < 1 || stored.version() > kPlanVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the stored job plan has version ", stored.version(),
        ", and this coordinator knows "
        "versions 1 to ",
        kPlanVersion,
        stored.version() > kPlanVersion
            ? ": it was stored by a newer coordinator; run that version (or a newer one)"
            : ": the record is damaged"));
  }
  if (stored.version() < 2) *stored.mutable_restart() = DecideRestart(spec);
  stored.set_version(kPlanVersion);
  return stored;
}

}  // namespace jobspec
}  // namespace lockstep

// LowerJobSpec: a JobSpec and the cluster's facts in, the job's plan out (job_plan.proto).
// The one place a job's meaning is decided (DESIGN.md, "A job's meaning is decided once"):
//   1. the spec's own rules (rules.h: CheckSpecRules),
//   2. the rules that need the cluster: the global batch split over the replicas of the
//      workers the job would get now, the model and one replica's batch against the
//      coordinator's limits, an elastic restart policy against the heartbeat timeout and the
//      worker counts that split the batch, GPU replicas against the workers that offer GPUs,
//      communication.implementation against the replicas' kind,
//   3. the decisions: strategy (UNSPECIFIED is MULTI_WORKER_MIRRORED), workers, device kind
//      and replicas per worker, collective backend (AUTO: NCCL for GPU replicas, Lockstep's
//      collectives for CPU ones; distribute/communication_backend.h holds the table), every
//      default (4 MiB packs, 60 s collective timeout, keep 5 checkpoints, summaries every 10
//      steps, AUTO sharding, a 10 s replacement timeout), the input's evaluation data (held
//      out, a source, none), the restart policy's counts (max_workers resolved).
// Every error names the field first ("communication.implementation: ..."), once.
//
// Callers: the coordinator at submit (and for a stored job that has no plan yet, from an
// older coordinator), and every test or example that trains a job file in one process
// (ClusterFacts::OneWorker), so that a file that trains there is accepted when submitted.
// Stateless; thread-safe.
#ifndef LOCKSTEP_JOBSPEC_LOWER_H_
#define LOCKSTEP_JOBSPEC_LOWER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobspec/rules.h"
#include "lockstep/v1/job_plan.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace jobspec {

// The version LowerJobSpec writes into JobPlan.version; a worker refuses others. 2 added
// JobPlan.restart (UpgradePlan fills it into a stored version-1 plan).
constexpr int kPlanVersion = 2;

// One ALIVE training worker as the coordinator sees it (its registered devices).
struct WorkerFacts {
  int cpu_devices = 1;  // logical CPU devices (a device of no stated kind counts here)
  int gpus = 0;
};

// What the cluster is when the job is lowered.
struct ClusterFacts {
  // The ALIVE training workers, in the order the scheduler would take them; empty when
  // none is known yet (the batch split is then checked at scheduling, by the partitioner).
  std::vector<WorkerFacts> workers;
  // The coordinator's heartbeat timeout (an elastic job's replacement timeout must outlast
  // it); zero: not checked.
  absl::Duration heartbeat_timeout = absl::ZeroDuration();
  JobLimits limits;
  // false: the job was accepted against the workers before (a stored job from an older
  // coordinator, lowered again when recovered or started): the rules against today's workers
  // (the batch split, a GPU offered) are not run again; the spec's own rules, the limits and
  // the decisions are.
  bool check_workers = true;

  // One worker with `devices` devices of the job's kind (CPU devices, or GPUs with `gpus`):
  // a job trained in one process (tests, examples, `lockstep local`).
  static ClusterFacts OneWorker(int devices, bool gpus = false);
};

absl::StatusOr<v1::JobPlan> LowerJobSpec(const v1::JobSpec& spec, const ClusterFacts& cluster);

// A plan the coordinator stored at submit, brought to kPlanVersion: the sections an older
// lowering did not write are decided from `spec` (the one it was lowered from) as
// LowerJobSpec decides them, and everything it decided is kept. FAILED_PRECONDITION naming
// both versions for a plan newer than kPlanVersion (written by a newer coordinator) or one
// without a version.
absl::StatusOr<v1::JobPlan> UpgradePlan(v1::JobPlan stored, const v1::JobSpec& spec);

}  // namespace jobspec
}  // namespace lockstep

#endif  // LOCKSTEP_JOBSPEC_LOWER_H_

// Partitioner: turns a job attempt and the workers chosen for it into one Partition per
// worker (proto/lockstep/v1/assignment.proto), as DESIGN.md "Jobs and in-graph
// replication" says: one replica per device of every training worker, replica ids
// 0..N-1 in task order, worker rank 0 is the chief, one data shard per worker, one secret
// and one rendezvous prefix ("jobs/<id>/<attempt>") per attempt. The attempt's group
// travels typed, in TF_CONFIG's shape (Partition.cluster: {"worker": [registered addresses
// in rank order], "evaluator": [its address] when there is one}; Partition.task:
// worker/<rank> or evaluator/0), validated here with TF_CONFIG's rules; no JSON is made.
// Every partition carries the job's plan (job_plan.proto); how many replicas a worker runs is
// the plan's decision, counted by the caller into WorkerSlot.devices (scheduler.h ReplicasOn).
// Stateless functions.
#ifndef LOCKSTEP_COORDINATOR_PARTITIONER_H_
#define LOCKSTEP_COORDINATOR_PARTITIONER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tf_config.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/job_plan.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace coordinator {

// A worker chosen for a job, in rank order.
struct WorkerSlot {
  TaskRef task;         // its task in the cluster (e.g. worker/3)
  std::string address;  // its registered host:port
  int devices = 1;      // replicas it runs (ReplicasOn: as the plan puts them; at least 1)
};

// Replicas in sync over `workers`.
int64_t CountReplicas(const std::vector<WorkerSlot>& workers);

// The training workers' partitions in rank order, then, when `evaluator` is set, the
// evaluator's (task evaluator/0: the chief's spec, plan, prefix, secret; no replicas, no
// shard).
// INVALID_ARGUMENT when `workers` is empty, the global batch does not split evenly, or the
// group breaks TF_CONFIG's rules (an address used twice or not host:port, naming it).
absl::StatusOr<std::vector<v1::Partition>> MakePartitions(
    const std::string& job_id, int attempt, const v1::JobSpec& spec, const v1::JobPlan& plan,
    const std::vector<WorkerSlot>& workers, const std::string& secret,
    const std::optional<WorkerSlot>& evaluator = std::nullopt);

// "jobs/<id>/<attempt>"
std::string RendezvousPrefix(const std::string& job_id, int attempt);

// 32 random bytes from the OS, hex-encoded.
std::string NewJobSecret();

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_PARTITIONER_H_

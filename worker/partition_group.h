// The attempt's group as a Partition states it: Partition.cluster (TF_CONFIG's "cluster",
// typed) and Partition.task (this worker's task in it). Everything a worker needs to know
// about its place in the group (its rank, whether it is the chief, how many train, whether
// it evaluates, whether the attempt has an evaluator) is read here from those two fields,
// with TF_CONFIG's rules, so that no field repeats another on the wire.
//
//   CheckPartitionGroup  once, where a Partition enters the worker (JobExecutor::Create):
//                        INVALID_ARGUMENT naming "partition.cluster"/"partition.task".
//   PartitionTfConfig    the group as a TfConfig (MultiWorkerMirrored joins it).
//   WorkerRank ...       plain reads for a Partition that passed the check.
//   SetWorkerGroup       writes a group, for partitions made outside the coordinator.
//
// Thread model: pure functions.
#ifndef LOCKSTEP_WORKER_PARTITION_GROUP_H_
#define LOCKSTEP_WORKER_PARTITION_GROUP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tf_config.h"
#include "lockstep/v1/assignment.pb.h"

namespace lockstep {
namespace worker {

// The partition's group and task, validated (TfConfigFromProto); the message names the
// job, the attempt and the field.
absl::StatusOr<TfConfig> PartitionTfConfig(const v1::Partition& partition);

// OK when the partition's group is valid and its task is a training worker or the
// evaluator (the only tasks the coordinator assigns).
absl::Status CheckPartitionGroup(const v1::Partition& partition);

// The worker's rank (its index among the group's "worker" tasks; 0 is the chief); -1 for
// the evaluator.
int WorkerRank(const v1::Partition& partition);
// Training workers in the group (the evaluator is outside it).
int NumWorkers(const v1::Partition& partition);
// Rank 0 (TF_CONFIG: worker 0 is the chief when there is no "chief" task).
bool IsChief(const v1::Partition& partition);
bool IsEvaluator(const v1::Partition& partition);
// Whether the attempt has an evaluator, to which the chief sends every checkpoint.
bool HasEvaluator(const v1::Partition& partition);

// For partitions made outside the coordinator (tests, benches): the group's workers are
// `addresses` in rank order and this partition is worker/<rank> (replaces both fields).
void SetWorkerGroup(const std::vector<std::string>& addresses, int rank, v1::Partition* partition);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_PARTITION_GROUP_H_

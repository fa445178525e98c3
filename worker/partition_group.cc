#include "worker/partition_group.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_proto.h"

namespace lockstep {
namespace worker {
namespace {

int Count(const v1::Partition& partition, const std::string& type) {
  auto it = partition.cluster().jobs().find(type);
  return it == partition.cluster().jobs().end() ? 0 : it->second.addresses_size();
}

absl::Status Invalid(const v1::Partition& partition, absl::string_view field,
                     absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("partition.", field, " of job ",
                                                 partition.job_id(), " attempt ",
                                                 partition.attempt(), ": ", what));
}

}  // namespace

absl::StatusOr<TfConfig> PartitionTfConfig(const v1::Partition& partition) {
  if (!partition.has_task()) return Invalid(partition, "task", "is missing");
  if (partition.cluster().jobs().empty()) {
    // What a coordinator from before the typed group sends (its group was TF_CONFIG text).
    return Invalid(partition, "cluster",
                   "is empty; a coordinator older than this worker sends the group as TF_CONFIG "
                   "text, which workers no longer read: run the same version on both");
  }
  absl::StatusOr<TfConfig> tf = TfConfigFromProto(partition.cluster(), partition.task());
  if (!tf.ok()) {
    // TfConfig names the part at fault ("TF_CONFIG task.index: ...", "TF_CONFIG
    // cluster.worker[1]: ..."); say which Partition field holds it.
    const bool task = absl::StartsWith(tf.status().message(), "TF_CONFIG task");
    return Invalid(partition, task ? "task" : "cluster", tf.status().message());
  }
  return tf;
}

absl::Status CheckPartitionGroup(const v1::Partition& partition) {
  absl::StatusOr<TfConfig> tf = PartitionTfConfig(partition);
  if (!tf.ok()) return tf.status();
  if (tf->cluster().count("chief") > 0 || tf->cluster().count("ps") > 0) {
    return Invalid(partition, "cluster",
                   "has a chief or ps task; a job's group is its workers (worker 0 the chief) "
                   "and at most an evaluator");
  }
  const std::string& type = tf->task_type();
  if (type != "worker" && type != "evaluator") {
    return Invalid(partition, "task",
                   absl::StrCat(tf->task().ToString(), " is neither a worker nor the evaluator"));
  }
  if (type == "evaluator" && !HasEvaluator(partition)) {
    return Invalid(partition, "cluster", "has no evaluator, but this task is evaluator/0");
  }
  return absl::OkStatus();
}

int WorkerRank(const v1::Partition& partition) {
  return partition.task().type() == "worker" ? partition.task().index() : -1;
}

int NumWorkers(const v1::Partition& partition) { return Count(partition, "worker"); }

bool IsChief(const v1::Partition& partition) { return WorkerRank(partition) == 0; }

bool IsEvaluator(const v1::Partition& partition) { return partition.task().type() == "evaluator"; }

bool HasEvaluator(const v1::Partition& partition) { return Count(partition, "evaluator") > 0; }

void SetWorkerGroup(const std::vector<std::string>& addresses, int rank, v1::Partition* partition) {
  partition->clear_cluster();
  ToProto(ClusterMap{{"worker", addresses}}, partition->mutable_cluster());
  ToProto(TaskRef{"worker", rank}, partition->mutable_task());
}

}  // namespace worker
}  // namespace lockstep

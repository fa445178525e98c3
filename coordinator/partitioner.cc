#include "coordinator/partitioner.h"

#include "absl/strings/str_cat.h"
#include "common/cluster_proto.h"
#include "common/secure_random.h"
#include "common/status.h"
#include "jobspec/rules.h"

namespace lockstep {
namespace coordinator {

std::string RendezvousPrefix(const std::string& job_id, int attempt) {
  return absl::StrCat("jobs/", job_id, "/", attempt);
}

std::string NewJobSecret() { return SecureRandomHex(32); }

int64_t CountReplicas(const std::vector<WorkerSlot>& workers) {
  int64_t n = 0;
  for (const WorkerSlot& w : workers) n += std::max(1, w.devices);
  return n;
}

absl::StatusOr<std::vector<v1::Partition>> MakePartitions(
    const std::string& job_id, int attempt, const v1::JobSpec& spec, const v1::JobPlan& plan,
    const std::vector<WorkerSlot>& workers, const std::string& secret,
    const std::optional<WorkerSlot>& evaluator) {
  if (workers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, ": no worker to run it on"));
  }
  const int64_t replicas = CountReplicas(workers);
  LS_RETURN_IF_ERROR(jobspec::CheckBatchDivisible(spec, replicas));
  ClusterMap group;
  for (const WorkerSlot& w : workers) group["worker"].push_back(w.address);
  if (evaluator.has_value()) group["evaluator"].push_back(evaluator->address);
  // Once for the group: every task's view of it is valid when one is.
  if (absl::Status s = TfConfig::Create(group, TaskRef{"worker", 0}).status(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, " attempt ", attempt,
                                                   ": the tasks chosen make no valid group (",
                                                   s.message(), ")"));
  }
  v1::ClusterSpec cluster;
  ToProto(group, &cluster);

  std::vector<v1::Partition> out;
  int next_replica = 0;
  const int num_workers = static_cast<int>(workers.size());
  for (int rank = 0; rank < num_workers; ++rank) {
    v1::Partition p;
    p.set_job_id(job_id);
    p.set_attempt(attempt);
    *p.mutable_spec() = spec;
    *p.mutable_plan() = plan;
    *p.mutable_cluster() = cluster;
    ToProto(TaskRef{"worker", rank}, p.mutable_task());
    const int local = std::max(1, workers[rank].devices);
    for (int i = 0; i < local; ++i) p.add_replica_ids(next_replica++);
    p.set_num_replicas_in_sync(static_cast<int32_t>(replicas));
    p.set_shard_index(rank);
    p.set_num_shards(num_workers);
    p.set_rendezvous_prefix(RendezvousPrefix(job_id, attempt));
    p.set_secret(secret);
    out.push_back(std::move(p));
  }
  if (evaluator.has_value()) {
    v1::Partition p = out.front();
    ToProto(TaskRef{"evaluator", 0}, p.mutable_task());
    p.clear_replica_ids();
    p.set_shard_index(0);
    p.set_num_shards(0);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace coordinator
}  // namespace lockstep

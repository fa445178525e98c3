#include "coordinator/partitioner.h"

#include "absl/strings/str_cat.h"
#include "common/secure_random.h"
#include "common/status.h"
#include "jobspec/rules.h"

namespace lockstep {
namespace coordinator {

std::string RendezvousPrefix(const std::string& job_id, int attempt) {
  return absl::StrCat("jobs/", job_id, "/", attempt);
}

std::string NewJobSecret() { return SecureRandomHex(32); }

int64_t CountReplicas(const v1::JobSpec& spec, const std::vector<WorkerSlot>& workers) {
  if (jobspec::EffectiveStrategy(spec) == v1::ONE_DEVICE) return workers.empty() ? 0 : 1;
  int64_t n = 0;
  for (const WorkerSlot& w : workers) n += std::max(1, w.devices);
  return n;
}

absl::StatusOr<std::vector<v1::Partition>> MakePartitions(const std::string& job_id, int attempt,
                                                          const v1::JobSpec& spec,
                                                          const std::vector<WorkerSlot>& workers,
                                                          const std::string& secret) {
  if (workers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job_id, ": no worker to run it on"));
  }
  const int64_t replicas = CountReplicas(spec, workers);
  LS_RETURN_IF_ERROR(jobspec::CheckBatchDivisible(spec, replicas));
  ClusterMap cluster;
  for (const WorkerSlot& w : workers) cluster["worker"].push_back(w.address);
  std::vector<v1::Partition> out;
  int next_replica = 0;
  const int num_workers = static_cast<int>(workers.size());
  for (int rank = 0; rank < num_workers; ++rank) {
    LS_ASSIGN_OR_RETURN(TfConfig tf, TfConfig::Create(cluster, TaskRef{"worker", rank}));
    v1::Partition p;
    p.set_job_id(job_id);
    p.set_attempt(attempt);
    *p.mutable_spec() = spec;
    p.set_tf_config(tf.ToJson());
    p.mutable_task()->set_type("worker");
    p.mutable_task()->set_index(rank);
    p.set_worker_rank(rank);
    p.set_num_workers(num_workers);
    p.set_is_chief(rank == 0);
    const int local =
        jobspec::EffectiveStrategy(spec) == v1::ONE_DEVICE ? 1 : std::max(1, workers[rank].devices);
    for (int i = 0; i < local; ++i) p.add_replica_ids(next_replica++);
    p.set_num_replicas_in_sync(static_cast<int32_t>(replicas));
    p.set_shard_index(rank);
    p.set_num_shards(num_workers);
    p.set_rendezvous_prefix(RendezvousPrefix(job_id, attempt));
    p.set_secret(secret);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace coordinator
}  // namespace lockstep

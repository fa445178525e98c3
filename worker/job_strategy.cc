#include "worker/job_strategy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/tf_config.h"
#include "distribute/central_storage_strategy.h"
#include "distribute/mirrored_strategy.h"
#include "distribute/multi_worker_mirrored_strategy.h"
#include "distribute/one_device_strategy.h"
#include "worker/partition_group.h"

namespace lockstep {
namespace worker {

distribute::CommunicationOptions JobCommunicationOptions(const v1::CommunicationPlan& plan) {
  distribute::CommunicationOptions options;
  options.backend = plan.backend() == v1::CommunicationPlan::NCCL
                        ? distribute::CollectiveBackend::kNccl
                        : distribute::CollectiveBackend::kLockstep;
  if (plan.backend() == v1::CommunicationPlan::LOCKSTEP_RING) {
    options.implementation = distribute::Implementation::kRing;  // the ring algorithm only
  }
  options.bytes_per_pack = static_cast<size_t>(plan.bytes_per_pack());
  options.timeout = absl::Milliseconds(plan.timeout_ms());
  options.encrypt = plan.encrypt();
  options.compression =
      plan.bf16_compression() ? collectives::Compression::kBF16 : collectives::Compression::kNone;
  return options;
}

absl::StatusOr<distribute::LocalDevices> JobDevices(const v1::DevicePlan& plan,
                                                    const distribute::LocalDevices& worker) {
  distribute::LocalDevices devices = worker;
  if (plan.kind() != v1::DevicePlan::GPU) {
    devices.num_gpus = 0;  // a CPU job stays on /cpu:N, also on a GPU host
    return devices;
  }
  if (worker.num_gpus == 0) {
    return absl::FailedPreconditionError(
        "this worker cannot run the job's plan: it puts the replicas on GPUs, and this worker "
        "offers none (lockstepd --gpus in a --config=cuda build on a GPU host); a fact of this "
        "worker, not a rule of the job");
  }
  return devices;
}

absl::StatusOr<std::unique_ptr<distribute::Strategy>> MakeJobStrategy(
    const v1::Partition& partition, const JobStrategyOptions& job_options) {
  const v1::JobPlan& plan = partition.plan();
  JobStrategyOptions options = job_options;
  LS_ASSIGN_OR_RETURN(options.devices, JobDevices(plan.devices(), job_options.devices));
  const distribute::CommunicationOptions comm = JobCommunicationOptions(plan.communication());
  switch (plan.strategy()) {
    case v1::ONE_DEVICE: {
      const bool gpu = plan.devices().kind() == v1::DevicePlan::GPU;
      LS_ASSIGN_OR_RETURN(auto s, distribute::OneDeviceStrategy::Create(gpu ? "/gpu:0" : "/cpu:0",
                                                                        options.devices));
      return std::unique_ptr<distribute::Strategy>(std::move(s));
    }
    case v1::MIRRORED: {
      distribute::MirroredStrategyOptions o;
      o.available = options.devices;
      o.communication = comm;
      o.nccl = options.nccl;
      LS_ASSIGN_OR_RETURN(auto s, distribute::MirroredStrategy::Create(o));
      return std::unique_ptr<distribute::Strategy>(std::move(s));
    }
    case v1::CENTRAL_STORAGE: {
      distribute::CentralStorageStrategyOptions o;
      o.available = options.devices;
      o.communication = comm;
      LS_ASSIGN_OR_RETURN(auto s, distribute::CentralStorageStrategy::Create(o));
      return std::unique_ptr<distribute::Strategy>(std::move(s));
    }
    case v1::MULTI_WORKER_MIRRORED: {
      LS_ASSIGN_OR_RETURN(TfConfig cluster, PartitionTfConfig(partition));
      if (options.store == nullptr) {
        return absl::InvalidArgumentError("MultiWorkerMirrored needs a rendezvous store");
      }
      distribute::MultiWorkerMirroredStrategyOptions o;
      o.available = options.devices;
      o.communication = comm;
      o.nccl = options.nccl;
      o.hierarchical = plan.communication().hierarchical();
      o.communication.shm_heap_bytes = options.shm_heap_bytes;
      o.store = options.store;
      o.key_prefix = "strategy";  // the store itself is scoped by the rendezvous prefix
      o.secret = partition.secret();
      o.transport = options.transport;
      o.listen_host = options.listen_host;
      o.data_port = options.data_port;
      o.data_port_origin = "lockstepd --data_port";
      o.connect_timeout = options.connect_timeout;
      o.observer = options.observer;
      o.cross_worker_observer = options.cross_worker_observer;
      LS_ASSIGN_OR_RETURN(auto s, distribute::MultiWorkerMirroredStrategy::Create(cluster, o));
      return std::unique_ptr<distribute::Strategy>(std::move(s));
    }
    default:
      // Never in a lowered plan: a partition without one (a coordinator from before plans),
      // which JobExecutor::Create refuses first.
      return absl::InvalidArgumentError(
          absl::StrCat("partition.plan.strategy of job ", partition.job_id(), ": ",
                       v1::StrategyKind_Name(plan.strategy()), " is not a lowered strategy"));
  }
}

size_t ShmHeapBytes(const std::vector<size_t>& gradient_bytes) {
  size_t total = 0;
  for (size_t b : gradient_bytes) total += (b + 63) / 64 * 64;
  return total + total / 4 + (1 << 20);
}

}  // namespace worker
}  // namespace lockstep

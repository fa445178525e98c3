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

distribute::CommunicationOptions JobCommunicationOptions(const v1::JobSpec& spec) {
  const v1::CommunicationSpec& c = spec.communication();
  distribute::CommunicationOptions options;
  // Resolved per replica kind by the strategies (distribute/communication_backend.h).
  options.implementation = distribute::ImplementationFromSpec(c.implementation());
  options.bytes_per_pack = c.bytes_per_pack() > 0 ? static_cast<size_t>(c.bytes_per_pack()) : 0;
  options.timeout = absl::Milliseconds(c.timeout_ms() > 0 ? c.timeout_ms() : 60000);
  options.encrypt = c.encrypt();
  options.compression = c.compression() == v1::CommunicationSpec::BF16
                            ? collectives::Compression::kBF16
                            : collectives::Compression::kNone;
  return options;
}

absl::StatusOr<distribute::LocalDevices> JobDevices(const v1::JobSpec& spec,
                                                    const distribute::LocalDevices& worker) {
  distribute::LocalDevices devices = worker;
  if (!spec.gpus()) {
    devices.num_gpus = 0;  // a CPU job stays on /cpu:N, also on a GPU host
    return devices;
  }
  if (worker.num_gpus == 0) {
    return absl::FailedPreconditionError(
        "gpus: the job asks for GPU replicas, but this worker offers none (lockstepd --gpus in "
        "a --config=cuda build on a GPU host)");
  }
  return devices;
}

absl::StatusOr<std::unique_ptr<distribute::Strategy>> MakeJobStrategy(
    const v1::Partition& partition, const JobStrategyOptions& job_options) {
  const v1::JobSpec& spec = partition.spec();
  JobStrategyOptions options = job_options;
  LS_ASSIGN_OR_RETURN(options.devices, JobDevices(spec, job_options.devices));
  const distribute::CommunicationOptions comm = JobCommunicationOptions(spec);
  const v1::StrategyKind kind = spec.strategy();
  if (kind != v1::MULTI_WORKER_MIRRORED && kind != v1::STRATEGY_KIND_UNSPECIFIED &&
      NumWorkers(partition) > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strategy: ", v1::StrategyKind_Name(kind), " runs on one worker, but job ",
        partition.job_id(), " was given ", NumWorkers(partition), "; use MULTI_WORKER_MIRRORED"));
  }
  switch (kind) {
    case v1::ONE_DEVICE: {
      LS_ASSIGN_OR_RETURN(auto s, distribute::OneDeviceStrategy::Create(
                                      spec.gpus() ? "/gpu:0" : "/cpu:0", options.devices));
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
    default: {
      LS_ASSIGN_OR_RETURN(TfConfig cluster, PartitionTfConfig(partition));
      if (options.store == nullptr) {
        return absl::InvalidArgumentError("MultiWorkerMirrored needs a rendezvous store");
      }
      distribute::MultiWorkerMirroredStrategyOptions o;
      o.available = options.devices;
      o.communication = comm;
      o.nccl = options.nccl;
      o.hierarchical = !spec.communication().flat();
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
  }
}

size_t ShmHeapBytes(const std::vector<size_t>& gradient_bytes) {
  size_t total = 0;
  for (size_t b : gradient_bytes) total += (b + 63) / 64 * 64;
  return total + total / 4 + (1 << 20);
}

}  // namespace worker
}  // namespace lockstep

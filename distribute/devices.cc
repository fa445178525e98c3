#include "distribute/devices.h"

#include "absl/strings/str_cat.h"

namespace lockstep::distribute {

bool BuiltWithCuda() {
#ifdef LOCKSTEP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::vector<engine::Device>> ResolveDevices(const std::vector<std::string>& names,
                                                           const LocalDevices& available) {
  std::vector<engine::Device> out;
  if (names.empty()) {
    if (available.num_gpus > 0) {
      for (int i = 0; i < available.num_gpus; ++i) {
        out.emplace_back(engine::Device::Type::kCuda, i);
      }
    } else {
      for (int i = 0; i < available.num_cpu_devices; ++i) out.push_back(engine::Device::Cpu(i));
    }
    if (out.empty()) return absl::NotFoundError("this worker has no devices");
    return out;
  }
  const std::string have =
      absl::StrCat("this worker has /cpu:0../cpu:", available.num_cpu_devices - 1, " and ",
                   available.num_gpus, " GPU(s)");
  for (const std::string& name : names) {
    absl::StatusOr<engine::Device> d = engine::Device::Parse(name);
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", name,
                       "\" is not a device name (expected \"/cpu:N\" or "
                       "\"/gpu:N\"): ",
                       d.status().message()));
    }
    const int limit =
        d->type() == engine::Device::Type::kCpu ? available.num_cpu_devices : available.num_gpus;
    if (d->index() < 0 || d->index() >= limit) {
      return absl::NotFoundError(absl::StrCat("device \"", name, "\" does not exist: ", have,
                                              " (logical CPU devices come from --cpu_devices)"));
    }
    for (const engine::Device& seen : out) {
      if (seen == *d) {
        return absl::InvalidArgumentError(
            absl::StrCat("device \"", name, "\" is listed twice; one replica per device"));
      }
    }
    out.push_back(*d);
  }
  return out;
}

absl::StatusOr<CollectiveBackend> CheckBackend(const CommunicationOptions& communication,
                                               const std::vector<engine::Device>& devices,
                                               bool built_with_cuda,
                                               const std::string& strategy_name) {
  BackendQuery query;
  query.implementation = communication.implementation;
  query.built_with_cuda = built_with_cuda;
  bool cpu = false;
  bool gpu = false;
  for (const engine::Device& d : devices) {
    (d.type() == engine::Device::Type::kCpu ? cpu : gpu) = true;
  }
  if (cpu && gpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(strategy_name, ": devices mix /cpu:N and /gpu:N; one replica kind per job"));
  }
  if (communication.backend.has_value()) {
    // Decided by the job's plan: only what this worker has is checked.
    if (*communication.backend == CollectiveBackend::kNccl && !built_with_cuda) {
      return absl::FailedPreconditionError(absl::StrCat(
          strategy_name,
          ": this worker cannot run the job's plan: it carries the replicas' collectives over "
          "NCCL, and this worker has no NCCL (lockstepd built without --config=cuda); a fact "
          "of this worker, not a rule of the job"));
    }
    return *communication.backend;
  }
  query.replicas = gpu ? ReplicaKind::kGpu : ReplicaKind::kCpu;
  absl::StatusOr<CollectiveBackend> backend = ResolveBackend(query);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat(strategy_name, ": ", backend.status().message()));
  }
  return backend;
}

}  // namespace lockstep::distribute

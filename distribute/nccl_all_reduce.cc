#include "distribute/nccl_all_reduce.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "collectives/in_memory_store.h"
#include "collectives/nccl/nccl_communicator.h"
#include "common/status.h"
#include "distribute/device_bf16_codec.h"
#include "distribute/devices.h"

namespace lockstep::distribute {

bool HasNccl(const NcclEnvironment& env) { return BuiltWithCuda() || env.api != nullptr; }

absl::StatusOr<std::unique_ptr<NcclAllReduce>> NcclAllReduce::Create(
    const NcclAllReduceOptions& options) {
  const NcclEnvironment& env = options.env;
  if (env.api == nullptr) {
    return absl::InvalidArgumentError(
        "NcclAllReduce: this worker has no NCCL library (lockstepd loads libnccl.so.2 at start "
        "in a --config=cuda build)");
  }
  for (const engine::Device& d : options.devices) {
    if (d.type() != engine::Device::Type::kCuda) {
      return absl::InvalidArgumentError(
          absl::StrCat("NcclAllReduce: replica device ", d.name(), " is not a GPU"));
    }
  }
  // BF16 compression of device gradients narrows and widens with kernels on the stream the
  // communicator uses: the compute stream (a stream of env.stream's would need events).
  const bool device_bf16 = options.gpus != nullptr &&
                           options.communication.compression == collectives::Compression::kBF16;
  if (device_bf16 && env.stream) {
    return absl::InvalidArgumentError(
        "NcclAllReduce: communication.compression BF16 on GPU replicas runs NCCL on each "
        "device's compute stream; leave NcclEnvironment::stream unset");
  }
  auto signal =
      env.signal != nullptr ? env.signal : std::make_shared<collectives::nccl::AbortSignal>();
  collectives::InMemoryStore private_store;
  collectives::Store* store = options.store != nullptr ? options.store : &private_store;
  Clock* clock = env.clock != nullptr ? env.clock : Clock::Real();
  const absl::Time init_deadline = clock->Now() + options.communication.timeout;

  // NCCL's init needs every rank: the local ones join concurrently.
  const int n = static_cast<int>(options.devices.size());
  std::vector<absl::StatusOr<std::unique_ptr<collectives::nccl::NcclCommunicator>>> comms(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      collectives::nccl::NcclCommunicatorOptions o;
      o.rank = options.first_rank + r;
      o.size = options.num_replicas_in_sync;
      o.store = store;
      o.key = options.key;
      o.api = env.api;
      // NCCL takes the CUDA ordinal under the replica's /gpu:N (GpuDeviceSet::Create).
      const int index = options.devices[r].index();
      const engine::gpu::GpuDevice* gpu =
          options.gpus != nullptr ? options.gpus->Find(index) : nullptr;
      o.device = gpu != nullptr ? gpu->context->device() : index;
      o.stream = env.stream ? env.stream(index) : nullptr;
      if (!env.stream && gpu != nullptr) {
        o.stream = static_cast<collectives::nccl::DeviceStream>(gpu->stream());
      }
      o.clock = clock;
      o.signal = signal;
      o.init_deadline = init_deadline;
      comms[r] = collectives::nccl::NcclCommunicator::Create(std::move(o));
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::unique_ptr<collectives::CollectiveCommunicator>> owned;
  for (int r = 0; r < n; ++r) {
    if (!comms[r].ok()) {
      return Annotate(comms[r].status(),
                      absl::StrCat("NcclAllReduce: replica ", options.first_rank + r, " on ",
                                   options.devices[r].name()));
    }
    owned.push_back(*std::move(comms[r]));
  }
  // Replicas with a device narrow on it (DeviceBf16Codec); without one (host values placed
  // on /gpu:N, as in tests without device handles) FusedAllReduce narrows on the host.
  std::vector<std::unique_ptr<collectives::Bf16Codec>> codecs(n);
  for (int r = 0; r < n && device_bf16; ++r) {
    if (const engine::gpu::GpuDevice* gpu = options.gpus->Find(options.devices[r].index())) {
      codecs[r] = std::make_unique<DeviceBf16Codec>(gpu);
    }
  }
  auto ops = std::make_unique<CollectiveOps>(
      std::move(owned), options.num_replicas_in_sync, options.cross_worker,
      options.communication.bytes_per_pack, options.communication.compression, std::move(codecs));
  return std::unique_ptr<NcclAllReduce>(
      new NcclAllReduce(std::move(signal), std::move(ops), options.cross_worker));
}

void NcclAllReduce::PeerLost(int rank, const std::string& reason) {
  // Not Abort(): the NCCL communicators would then report ABORTED, not the lost rank.
  signal_->PeerLost(rank, reason);
  if (cross_worker_ != nullptr) cross_worker_->Abort();
}

}  // namespace lockstep::distribute

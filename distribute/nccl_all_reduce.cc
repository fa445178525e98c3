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
  const bool device_bf16 = options.gpus != nullptr &&
                           options.communication.compression == collectives::Compression::kBF16;
  auto signal =
      env.signal != nullptr ? env.signal : std::make_shared<collectives::nccl::AbortSignal>();
  collectives::InMemoryStore private_store;
  collectives::Store* store = options.store != nullptr ? options.store : &private_store;
  Clock* clock = env.clock != nullptr ? env.clock : Clock::Real();
  const absl::Time init_deadline = clock->Now() + options.communication.timeout;

  // Each replica with a GpuDevice gets a communication stream of its GPU.
  const int n = static_cast<int>(options.devices.size());
  std::vector<CommStream> streams(n);
  for (int r = 0; r < n; ++r) {
    const engine::gpu::GpuDevice* gpu =
        options.gpus != nullptr ? options.gpus->Find(options.devices[r].index()) : nullptr;
    if (gpu == nullptr) continue;
    CudaApi& api = gpu->context->api();
    absl::Status s = api.SetDevice(gpu->context->device());
    absl::StatusOr<CudaStream> stream = s.ok() ? api.StreamCreate() : s;
    if (!stream.ok()) {
      DestroyStreams(streams);
      return Annotate(stream.status(), absl::StrCat("NcclAllReduce: the communication stream of ",
                                                    options.devices[r].name()));
    }
    streams[r] = {&api, *stream};
  }

  // NCCL's init needs every rank: the local ones join concurrently.
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
      if (gpu != nullptr) {
        o.stream = static_cast<collectives::nccl::DeviceStream>(streams[r].stream);
        o.cuda = streams[r].api;
        o.producer = gpu->stream();
        o.wait_for_producer = !options.test_skip_producer_wait;
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
      absl::Status failed = Annotate(
          comms[r].status(), absl::StrCat("NcclAllReduce: replica ", options.first_rank + r, " on ",
                                          options.devices[r].name()));
      owned.clear();  // the communicators before their streams
      comms.clear();
      DestroyStreams(streams);
      return failed;
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
  return std::unique_ptr<NcclAllReduce>(new NcclAllReduce(std::move(signal), std::move(streams),
                                                          std::move(ops), options.cross_worker));
}

NcclAllReduce::~NcclAllReduce() {
  ops_.reset();
  DestroyStreams(streams_);
}

void NcclAllReduce::DestroyStreams(const std::vector<CommStream>& streams) {
  for (const CommStream& s : streams) {
    if (s.stream != nullptr) s.api->StreamDestroy(s.stream).IgnoreError();
  }
}

void NcclAllReduce::PeerLost(int rank, const std::string& reason) {
  // Not Abort(): the NCCL communicators would then report ABORTED, not the lost rank.
  signal_->PeerLost(rank, reason);
  if (cross_worker_ != nullptr) cross_worker_->Abort();
}

}  // namespace lockstep::distribute

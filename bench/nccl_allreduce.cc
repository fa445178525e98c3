// bench/nccl_allreduce: our NCCL all-reduce (NcclCommunicator over RealNcclApi) with --np
// ranks as --np processes sharing GPU 0, each with its own NCCL_HOSTID so that NCCL treats them
// as separate hosts (as collectives/nccl/nccl_gpu_test.cc's two-process test). The ranks meet
// through a FileStore in a temporary directory. For each size from --min_bytes to --max_bytes
// (times --factor, then --max_bytes itself) rank 0 prints nccl-tests' columns: the time of one
// blocking AllReduce (enqueue, then wait for completion) averaged over --iters after --warmup,
// algbw = bytes / time and busbw = algbw * 2(n-1)/n, and #wrong (the first and last received
// elements checked against the sum of every rank's value).
// tools/gpu/torch_allreduce.py runs torch.distributed's NCCL all-reduce in the same setting;
// tools/gpu_check.sh prints the two side by side.
//   run.sh bin/nccl_allreduce --np=2 --min_bytes=8 --max_bytes=268435456 --iters=20
// Needs a GPU and libnccl.so.2 on LD_LIBRARY_PATH; without them each rank says what is missing
// and the binary exits 1.
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectives/file_store.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/nccl/real_nccl_api.h"
#include "common/child_processes.h"
#include "common/clock.h"
#include "common/cuda/cuda_status.h"

ABSL_FLAG(int, np, 2, "ranks, each a process on GPU 0");
ABSL_FLAG(int64_t, min_bytes, 8, "smallest message (f32: a multiple of 4)");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20, "largest message");
ABSL_FLAG(int, factor, 4, "each size is the previous one times this");
ABSL_FLAG(int, warmup, 5, "untimed all-reduces per size");
ABSL_FLAG(int, iters, 20, "timed all-reduces per size");
ABSL_FLAG(bool, same_host, false,
          "leave NCCL_HOSTID alone (NCCL then refuses two ranks on one GPU)");
ABSL_FLAG(int, timeout_s, 300, "bound of the whole run; the ranks are killed after it");

namespace lockstep::bench {
namespace {

using collectives::FileStore;
using collectives::ReduceOp;
using collectives::nccl::NcclCommunicator;
using collectives::nccl::NcclCommunicatorOptions;
using collectives::nccl::RealNcclApi;

struct Config {
  int np;
  std::vector<int64_t> sizes;  // bytes
  int warmup;
  int iters;
  absl::Duration timeout;
};

std::vector<int64_t> Sizes(int64_t min_bytes, int64_t max_bytes, int factor) {
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s < max_bytes; s *= factor) sizes.push_back(s);
  sizes.push_back(max_bytes);
  return sizes;
}

// Device memory freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() { cudaFree(p); }
};

// One rank: all-reduces every size and, on rank 0, prints a row per size.
absl::Status RunRank(int rank, const Config& config, FileStore* store) {
  const absl::Time deadline = absl::Now() + config.timeout;
  int devices = 0;
  absl::Status s = CudaStatus(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (!s.ok()) return s;
  s = CudaStatus(cudaSetDevice(0), "cudaSetDevice(0)");
  if (!s.ok()) return s;
  absl::StatusOr<std::unique_ptr<RealNcclApi>> api = RealNcclApi::Load();
  if (!api.ok()) return api.status();
  cudaStream_t stream;
  s = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  if (!s.ok()) return s;

  const int64_t max_bytes = config.sizes.back();
  DeviceBuffer send, recv;
  s = CudaStatus(cudaMalloc(&send.p, max_bytes), "cudaMalloc(send)");
  if (s.ok()) s = CudaStatus(cudaMalloc(&recv.p, max_bytes), "cudaMalloc(recv)");
  if (!s.ok()) return s;
  const std::vector<float> values(max_bytes / sizeof(float), static_cast<float>(rank + 1));
  s = CudaStatus(cudaMemcpy(send.p, values.data(), max_bytes, cudaMemcpyHostToDevice), "fill");
  if (!s.ok()) return s;

  NcclCommunicatorOptions o;
  o.rank = rank;
  o.size = config.np;
  o.store = store;
  o.api = api->get();
  o.stream = stream;
  o.clock = Clock::Real();
  o.init_deadline = deadline;
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Create(o);
  if (!comm.ok()) return comm.status();

  const float want = config.np * (config.np + 1) / 2.0f;
  if (rank == 0) {
    std::printf(
        "# nccl_allreduce: %d ranks on GPU 0 (of %d), f32 sum, blocking calls, "
        "warmup %d, iters %d\n",
        config.np, devices, config.warmup, config.iters);
    std::printf("# %12s %12s %6s %12s %12s %12s %7s\n", "size(B)", "count", "type", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    std::fflush(stdout);
  }
  for (const int64_t bytes : config.sizes) {
    const size_t count = bytes / sizeof(float);
    s = CudaStatus(cudaMemset(recv.p, 0, bytes), "cudaMemset(recv)");
    if (!s.ok()) return s;
    auto all_reduce = [&]() {
      return (*comm)->AllReduce(send.p, recv.p, count, DType::kF32, ReduceOp::kSum, deadline);
    };
    for (int i = 0; i < config.warmup; ++i) {
      if (s = all_reduce(); !s.ok()) return s;
    }
    if (s = (*comm)->Barrier(deadline); !s.ok()) return s;
    const absl::Time start = absl::Now();
    for (int i = 0; i < config.iters; ++i) {
      if (s = all_reduce(); !s.ok()) return s;
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / config.iters;
    float ends[2] = {0, 0};
    const float* r = static_cast<const float*>(recv.p);
    s = CudaStatus(cudaMemcpy(&ends[0], r, sizeof(float), cudaMemcpyDeviceToHost), "read");
    if (s.ok()) {
      s = CudaStatus(cudaMemcpy(&ends[1], r + count - 1, sizeof(float), cudaMemcpyDeviceToHost),
                     "read");
    }
    if (!s.ok()) return s;
    const int wrong = (ends[0] != want) + (ends[1] != want);
    if (rank == 0) {
      const double algbw = bytes / seconds / 1e9;
      const double busbw = algbw * 2.0 * (config.np - 1) / config.np;
      std::printf("  %12lld %12zu %6s %12.2f %12.3f %12.3f %7d\n", static_cast<long long>(bytes),
                  count, "float", seconds * 1e6, algbw, busbw, wrong);
      std::fflush(stdout);
    }
    if (wrong != 0) {
      return absl::DataLossError(absl::StrCat("rank ", rank, ": ", bytes, " B all-reduce gave ",
                                              ends[0], " and ", ends[1], ", want ", want));
    }
  }
  comm->reset();
  cudaStreamDestroy(stream);
  return absl::OkStatus();
}

// A rank's process: its NCCL host, the store, the sweep; the process's exit status.
int RankProcess(int rank, const Config& config, bool same_host, const std::string& dir) {
  if (!same_host) setenv("NCCL_HOSTID", absl::StrCat("lockstep-bench-host-", rank).c_str(), 1);
  FileStore store(dir);
  const absl::Status s = RunRank(rank, config, &store);
  if (!s.ok()) {
    std::fprintf(stderr, "nccl_allreduce: rank %d of %d failed: %s\n", rank, config.np,
                 s.ToString().c_str());
  }
  return s.ok() ? 0 : 2;
}

// Forks the ranks (before anything touches CUDA), then waits for them until the timeout.
int Run(const Config& config, bool same_host) {
  char dir[] = "/tmp/lockstep_nccl_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::perror("nccl_allreduce: mkdtemp");
    return 1;
  }
  ChildProcesses ranks;
  absl::Status done = absl::OkStatus();
  for (int rank = 0; rank < config.np && done.ok(); ++rank) {
    done = ranks
               .Fork(absl::StrCat("rank ", rank),
                     [&, rank] { return RankProcess(rank, config, same_host, dir); })
               .status();
  }
  // Each rank bounds itself by its deadline; this is the backstop. A failed rank's peers would
  // wait for it until then: WaitAll kills them at once.
  if (done.ok()) {
    done = ranks.WaitAll(config.timeout + absl::Seconds(10));
  } else {
    ranks.KillAll();
  }
  std::filesystem::remove_all(dir);
  if (!done.ok()) {
    std::fprintf(stderr, "nccl_allreduce: %s; the ranks still running were killed\n",
                 done.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  lockstep::bench::Config config;
  config.np = absl::GetFlag(FLAGS_np);
  const int64_t min_bytes = absl::GetFlag(FLAGS_min_bytes);
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_bytes);
  const int factor = absl::GetFlag(FLAGS_factor);
  config.warmup = absl::GetFlag(FLAGS_warmup);
  config.iters = absl::GetFlag(FLAGS_iters);
  config.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  if (config.np < 1 || min_bytes < 4 || min_bytes % 4 != 0 || max_bytes < min_bytes ||
      max_bytes % 4 != 0 || factor < 2 || config.warmup < 0 || config.iters < 1) {
    std::fprintf(stderr,
                 "nccl_allreduce: want --np >= 1, 4 <= --min_bytes <= --max_bytes (multiples "
                 "of 4 bytes: f32), --factor >= 2, --warmup >= 0, --iters >= 1\n");
    return 2;
  }
  config.sizes = lockstep::bench::Sizes(min_bytes, max_bytes, factor);
  return lockstep::bench::Run(config, absl::GetFlag(FLAGS_same_host));
}

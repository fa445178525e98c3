// fake_wait_latency: how long NcclCommunicator takes to return from a small all-reduce that
// is already complete when it starts waiting, on the fakes (FakeNcclApi over a FakeCudaApi's
// device memory, two ranks in threads): the host-side cost of Wait (the polls of
// ncclCommGetAsyncError and of the call's done event), with no sleep floor. Prints the median
// and the 99th percentile over --iters all-reduces of 2 floats, with events (a stream of its
// own) and without (the stream's state). A measurement tool, not a test.
//   bazel run -c opt //collectives/nccl:fake_wait_latency -- 20000
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "collectives/nccl/nccl_communicator.h"
#include "common/cuda/fake_cuda_api.h"

namespace lockstep::collectives::nccl {
namespace {

int Measure(bool events, int iters) {
  std::unique_ptr<FakeCudaApi> cuda = *FakeCudaApi::Create();
  FakeNcclWorld world;
  world.UseDeviceMemory(cuda.get());
  InMemoryStore store;
  std::vector<std::vector<absl::Duration>> took(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      FakeNcclApi api(&world);
      NcclCommunicatorOptions o;
      o.rank = rank;
      o.size = 2;
      o.store = &store;
      o.api = &api;
      o.clock = Clock::Real();
      o.init_deadline = absl::Now() + absl::Seconds(20);
      CudaStream producer = *cuda->StreamCreate();
      CudaStream comm = *cuda->StreamCreate();
      o.stream = comm;
      if (events) {
        o.cuda = cuda.get();
        o.producer = producer;
      }
      auto c = NcclCommunicator::Create(o);
      if (!c.ok()) std::abort();
      float* x = static_cast<float*>(*cuda->Malloc(2 * sizeof(float)));
      for (int i = 0; i < iters; ++i) {
        const absl::Time t0 = absl::Now();
        if (!(*c)->AllReduce(x, x, 2, DType::kF32, ReduceOp::kSum, absl::Now() + absl::Seconds(20))
                 .ok()) {
          std::abort();
        }
        took[rank].push_back(absl::Now() - t0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Per all-reduce, the rank that arrived last: it found the collective complete.
  std::vector<absl::Duration> d(iters);
  for (int i = 0; i < iters; ++i) d[i] = std::min(took[0][i], took[1][i]);
  std::sort(d.begin(), d.end());
  std::printf("%-26s median %7.2f us  p99 %7.2f us  (%d all-reduces of 8 B)\n",
              events ? "events (own stream)" : "stream state (no events)",
              absl::ToDoubleMicroseconds(d[d.size() / 2]),
              absl::ToDoubleMicroseconds(d[d.size() * 99 / 100]), iters);
  return 0;
}

}  // namespace
}  // namespace lockstep::collectives::nccl

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  lockstep::collectives::nccl::Measure(false, iters);
  lockstep::collectives::nccl::Measure(true, iters);
  return 0;
}

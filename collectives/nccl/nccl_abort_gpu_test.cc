// Needs a GPU (requires-gpu) and libnccl.so.2 on LD_LIBRARY_PATH: a rank killed mid-all-reduce
// with the real NCCL. Two processes share GPU 0 (distinct NCCL_HOSTID, so NCCL takes them for
// two hosts, as in nccl_gpu_test's TwoProcessesOnOneGpu): this test's process is rank 0, a
// fresh exec of this binary is rank 1. Both all-reduce 16 MiB in a loop; rank 0 SIGKILLs rank
// 1 while its own next all-reduce is in flight. A watcher thread of rank 0 notices the death
// (waitpid), as the coordinator notices a lost worker, and delivers the notice the coordinator
// would (AbortSignal::PeerLost). Rank 0's pending all-reduce must then fail within 2 s of the
// kill, UNAVAILABLE, naming rank 1, and the process must not hang.
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "collectives/file_store.h"
#include "collectives/nccl/abort_signal.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/nccl/real_nccl_api.h"
#include "collectives/transport/peer_failure.h"
#include "common/cuda/cuda_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

constexpr size_t kCount = size_t{4} << 20;  // floats: 16 MiB per all-reduce

absl::Time Later() { return absl::Now() + absl::Seconds(60); }

// A communicator of rank `rank` of 2 on GPU 0 with a non-blocking stream of its own; the
// stream and device buffer stay alive for the process (rank 1 is killed, rank 0 exits).
struct Rank {
  std::unique_ptr<RealNcclApi> api;
  std::unique_ptr<NcclCommunicator> comm;
  float* data = nullptr;
};

absl::StatusOr<Rank> MakeRank(int rank, Store* store, std::shared_ptr<AbortSignal> signal) {
  if (absl::Status s = CudaStatus(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
  cudaStream_t stream;
  if (absl::Status s =
          CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
      !s.ok()) {
    return s;
  }
  Rank r;
  absl::StatusOr<std::unique_ptr<RealNcclApi>> api = RealNcclApi::Load();
  if (!api.ok()) return api.status();
  r.api = *std::move(api);
  void* p = nullptr;
  if (absl::Status s = CudaStatus(cudaMalloc(&p, kCount * sizeof(float)), "cudaMalloc"); !s.ok()) {
    return s;
  }
  r.data = static_cast<float*>(p);
  if (absl::Status s = CudaStatus(cudaMemset(p, 0, kCount * sizeof(float)), "cudaMemset");
      !s.ok()) {
    return s;
  }
  NcclCommunicatorOptions o;
  o.rank = rank;
  o.size = 2;
  o.store = store;
  o.api = r.api.get();
  o.stream = stream;
  o.clock = Clock::Real();
  o.signal = std::move(signal);
  o.init_deadline = Later();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c = NcclCommunicator::Create(o);
  if (!c.ok()) return c.status();
  r.comm = *std::move(c);
  return r;
}

// Rank 1, in a process of its own (started by KilledRankFailsTheSurvivorWithinTwoSeconds with
// the store in the environment): all-reduces until it is killed. Skipped when run on its own.
TEST(NcclAbortGpuTest, RankOneProcess) {
  const char* dir = getenv("LOCKSTEP_NCCL_ABORT_TEST_STORE");
  if (dir == nullptr) GTEST_SKIP() << "rank 1 of KilledRankFailsTheSurvivorWithinTwoSeconds";
  FileStore store(dir);
  absl::StatusOr<Rank> r = MakeRank(1, &store, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  // Until killed (the parent's backstop kills it after 120 s at the latest).
  while (true) {
    absl::Status s =
        r->comm->AllReduce(r->data, r->data, kCount, DType::kF32, ReduceOp::kSum, Later());
    ASSERT_TRUE(s.ok()) << s;
  }
}

TEST(NcclAbortGpuTest, KilledRankFailsTheSurvivorWithinTwoSeconds) {
  char dir[] = "/tmp/lockstep_nccl_abort_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  // This process has not touched CUDA yet; the child is a fresh exec all the same.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("NCCL_HOSTID", "lockstep-abort-test-host-1", 1);
    setenv("LOCKSTEP_NCCL_ABORT_TEST_STORE", dir, 1);
    execl("/proc/self/exe", "nccl_abort_gpu_test", "--gtest_filter=NcclAbortGpuTest.RankOneProcess",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  setenv("NCCL_HOSTID", "lockstep-abort-test-host-0", 1);

  // The watcher: the coordinator's part, noticing the lost process and telling the survivor.
  auto signal = std::make_shared<AbortSignal>();
  absl::Notification child_gone;
  int child_status = 0;
  std::thread watcher([&] {
    waitpid(child, &child_status, 0);
    signal->PeerLost(1, absl::StrCat("its process ", child, " exited (status ", child_status, ")"));
    child_gone.Notify();
  });
  // The backstop: rank 1 never outlives this test.
  auto kill_child = [&] {
    if (!child_gone.HasBeenNotified()) kill(child, SIGKILL);
    watcher.join();
    std::filesystem::remove_all(dir);
  };

  FileStore store(dir);
  absl::StatusOr<Rank> r = MakeRank(0, &store, signal);
  if (!r.ok()) {
    kill_child();
    FAIL() << r.status();
  }
  // In lockstep with rank 1 for a few rounds, then the kill while round 4 is in flight.
  absl::Time killed_at = absl::InfiniteFuture();
  absl::Status failed;
  for (int round = 0; round < 1000 && failed.ok(); ++round) {
    Handle h =
        r->comm->AllReduceAsync(r->data, r->data, kCount, DType::kF32, ReduceOp::kSum, Later());
    if (round == 3) {
      killed_at = absl::Now();
      kill(child, SIGKILL);
    }
    failed = h->Wait();
  }
  const absl::Time failed_at = absl::Now();
  kill_child();
  ASSERT_FALSE(failed.ok()) << "rank 0's all-reduces went on after rank 1 was killed";
  EXPECT_LT(failed_at - killed_at, absl::Seconds(2)) << failed;
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_THAT(failed.message(), ::testing::HasSubstr("rank 1")) << failed;
  EXPECT_EQ(FailedRank(failed), std::optional<int>(1)) << failed;
  // Every later call fails at once with the same error.
  EXPECT_FALSE(r->comm->Barrier(Later()).ok());
}

}  // namespace
}  // namespace lockstep::collectives::nccl

// Needs a GPU (requires-gpu) and libnccl.so.2 on LD_LIBRARY_PATH: the NCCL communicator with
// the real NCCL, as one rank, as every GPU of this host in one NcclLocalGroup (skipped with
// fewer than two), and as two processes sharing GPU 0 (NCCL_HOSTID differs, so NCCL treats them
// as two hosts and goes through its network transport).
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/file_store.h"
#include "collectives/in_memory_store.h"
#include "collectives/nccl/nccl_communicator.h"
#include "collectives/nccl/nccl_local_group.h"
#include "collectives/nccl/real_nccl_api.h"
#include "common/cuda/cuda_status.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

// A float vector in device memory.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& v) : n_(v.size()) {
    cudaMalloc(&p_, n_ * sizeof(float));
    cudaMemcpy(p_, v.data(), n_ * sizeof(float), cudaMemcpyHostToDevice);
  }
  ~DeviceFloats() { cudaFree(p_); }
  float* get() { return static_cast<float*>(p_); }
  std::vector<float> Read() const {
    std::vector<float> v(n_);
    cudaMemcpy(v.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }

 private:
  size_t n_;
  void* p_ = nullptr;
};

absl::Time Later() { return absl::Now() + absl::Seconds(60); }

// One rank of `size` on GPU 0: all-reduces (rank+1) and checks the sum. 0 when it passes.
int RunRank(int rank, int size, Store* store) {
  if (absl::Status s = CudaStatus(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) {
    fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 10;
  }
  cudaStream_t stream;
  if (absl::Status s =
          CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
      !s.ok()) {
    fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 11;
  }
  absl::StatusOr<std::unique_ptr<RealNcclApi>> api = RealNcclApi::Load();
  if (!api.ok()) {
    fprintf(stderr, "%s\n", std::string(api.status().message()).c_str());
    return 12;
  }
  NcclCommunicatorOptions o;
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.api = api->get();
  o.stream = stream;
  o.clock = Clock::Real();
  o.init_deadline = Later();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c = NcclCommunicator::Create(o);
  if (!c.ok()) {
    fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
    return 13;
  }
  const size_t n = 1 << 20;
  DeviceFloats x(std::vector<float>(n, static_cast<float>(rank + 1)));
  absl::Status s = (*c)->AllReduce(x.get(), x.get(), n, DType::kF32, ReduceOp::kSum, Later());
  if (!s.ok()) {
    fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 14;
  }
  const float want = size * (size + 1) / 2.0f;
  for (float v : x.Read()) {
    if (v != want) return 15;
  }
  if (!(*c)->Barrier(Later()).ok()) return 16;
  c->reset();
  cudaStreamDestroy(stream);
  return 0;
}

TEST(NcclGpuTest, OneRank) {
  InMemoryStore store;
  EXPECT_EQ(RunRank(0, 1, &store), 0);
}

TEST(NcclGpuTest, LocalGroupOnEveryGpu) {
  int n = 0;
  ASSERT_TRUE(CudaStatus(cudaGetDeviceCount(&n), "cudaGetDeviceCount").ok());
  if (n < 2) GTEST_SKIP() << "needs two GPUs, this host shows " << n;
  absl::StatusOr<std::unique_ptr<RealNcclApi>> api = RealNcclApi::Load();
  ASSERT_TRUE(api.ok()) << api.status();
  std::vector<LocalGpu> gpus;
  std::vector<std::unique_ptr<DeviceFloats>> bufs;
  std::vector<const void*> send;
  std::vector<void*> recv;
  for (int d = 0; d < n; ++d) {
    ASSERT_TRUE(CudaStatus(cudaSetDevice(d), "cudaSetDevice").ok());
    cudaStream_t stream;
    ASSERT_TRUE(CudaStatus(cudaStreamCreate(&stream), "stream").ok());
    gpus.push_back(LocalGpu{d, d, stream});
    bufs.push_back(std::make_unique<DeviceFloats>(std::vector<float>(1000, d + 1.0f)));
    send.push_back(bufs.back()->get());
    recv.push_back(bufs.back()->get());
  }
  InMemoryStore store;
  NcclCommunicatorOptions o;
  o.size = n;
  o.store = &store;
  o.api = api->get();
  o.clock = Clock::Real();
  o.init_deadline = Later();
  auto group = NcclLocalGroup::Create(o, gpus);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE((*group)->AllReduce(send, recv, 1000, DType::kF32, ReduceOp::kSum, Later()).ok());
  for (auto& b : bufs) {
    for (float v : b->Read()) ASSERT_EQ(v, n * (n + 1) / 2.0f);
  }
}

// One rank of TwoProcessesOnOneGpu, in a process of its own: that test starts this binary
// again with only this test selected and the rank and store in the environment. A forked
// copy of the test process cannot use CUDA once the parent has (OneRank runs first), so each
// rank is a fresh exec. Skipped when run on its own.
TEST(NcclGpuTest, RankProcess) {
  const char* rank = getenv("LOCKSTEP_NCCL_TEST_RANK");
  const char* dir = getenv("LOCKSTEP_NCCL_TEST_STORE");
  if (rank == nullptr || dir == nullptr) GTEST_SKIP() << "a rank of TwoProcessesOnOneGpu";
  FileStore store(dir);
  EXPECT_EQ(RunRank(atoi(rank), 2, &store), 0);
}

TEST(NcclGpuTest, TwoProcessesOnOneGpu) {
  char dir[] = "/tmp/lockstep_nccl_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Two "hosts" as far as NCCL sees, so that it does not refuse two ranks on one GPU.
      setenv("NCCL_HOSTID", absl::StrCat("lockstep-test-host-", rank).c_str(), 1);
      setenv("LOCKSTEP_NCCL_TEST_RANK", absl::StrCat(rank).c_str(), 1);
      setenv("LOCKSTEP_NCCL_TEST_STORE", dir, 1);
      execl("/proc/self/exe", "nccl_gpu_test", "--gtest_filter=NcclGpuTest.RankProcess",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back(pid);
  }
  // Each child bounds itself by its deadlines; this is the backstop.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  for (pid_t pid : children) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "rank process " << pid << " did not finish";
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank process exited with " << status;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::collectives::nccl

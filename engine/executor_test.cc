// The executor tests (executor_test_body.h) on "/cpu:0" and on the fake "/gpu:0" (FakeCudaApi,
// the grid emulator, FakeBlasApi), plus the CPU-only cases: replica threads sharing one graph
// (CPU replicas; a GPU replica is one device driven by one thread) and the gradient allocator
// (ExecutorOptions::gradient_allocator places gradients in host memory, on a CPU device only).
#include <cstdlib>
#include <set>
#include <thread>

#include "engine/executor_test_body.h"

namespace lockstep::engine {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<BitwiseCpu, BitwiseFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, ExecutorTest, Devices);

namespace {

TEST(Executor, ReplicaThreadsSharingGraphAndVariablesMatchASerialRun) {
  Graph g = SmallMlp(0.2f);
  auto vars = *VariableSet::Initialize(g);
  constexpr int kReplicas = 4;
  std::vector<std::vector<Tensor>> serial(kReplicas), threaded(kReplicas);
  auto step = [&](int r, std::vector<Tensor>* out) {
    auto exec = *Executor::Create(&g, ExecutorOptions{Device::Cpu(r), 1});
    StepOptions options;
    options.replica_id = r;
    ASSERT_TRUE(
        exec->ComputeGradients(vars.tensors(), SmallMlpBatch(16, 16 * r), options, out).ok());
  };
  for (int r = 0; r < kReplicas; ++r) step(r, &serial[r]);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) threads.emplace_back(step, r, &threaded[r]);
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kReplicas; ++r) {
    for (int v = 0; v < 4; ++v) EXPECT_TRUE(serial[r][v].BitwiseEquals(threaded[r][v])) << r << v;
  }
}

// Hands out 64-byte-aligned buffers and remembers them; `fail` makes it return null.
struct RecordingAllocator {
  std::set<const void*> live;
  int allocations = 0;
  bool fail = false;
  BufferAllocator Get() {
    return [this](size_t bytes) -> std::shared_ptr<char> {
      if (fail) return nullptr;
      ++allocations;
      char* p = static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64));
      live.insert(p);
      return std::shared_ptr<char>(p, [this](char* q) {
        live.erase(q);
        std::free(q);
      });
    };
  }
};

// One step of `g` on a batch of `batch`, by `placed` (its gradients in other memory) and by a
// plain executor: the gradients must be bitwise equal. Returns placed's.
std::vector<Tensor> PlacedGradients(const Graph& g, int batch, Executor* placed) {
  auto vars = *VariableSet::Initialize(g);
  auto plain = *Executor::Create(&g);
  std::vector<Tensor> a, b;
  EXPECT_TRUE(placed->ComputeGradients(vars.tensors(), SmallMlpBatch(batch), {}, &a).ok());
  EXPECT_TRUE(plain->ComputeGradients(vars.tensors(), SmallMlpBatch(batch), {}, &b).ok());
  EXPECT_EQ(a.size(), b.size());
  for (size_t v = 0; v < a.size() && v < b.size(); ++v) {
    EXPECT_TRUE(a[v].BitwiseEquals(b[v])) << "gradient " << v;
  }
  return a;
}

std::unique_ptr<Executor> PlacedExecutor(const Graph& g, RecordingAllocator& memory) {
  ExecutorOptions options;
  options.gradient_allocator = memory.Get();
  return *Executor::Create(&g, options);
}

TEST(Executor, GradientsOfVariablesComeFromTheGradientAllocatorAndArePooled) {
  Graph g = SmallMlp();
  RecordingAllocator memory;
  auto placed = PlacedExecutor(g, memory);
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> a = PlacedGradients(g, 16, placed.get());
    ASSERT_EQ(a.size(), 4u);
    for (int v = 0; v < 4; ++v) {
      EXPECT_EQ(memory.live.count(a[v].raw_data()), 1u) << "gradient " << v << " step " << step;
    }
    // Only the four gradients (no activation) came from it, once: later steps reuse them.
    EXPECT_EQ(memory.allocations, 4) << "step " << step;
  }
}

TEST(Executor, GradientsFallBackToOrdinaryMemoryWhenTheAllocatorIsFull) {
  Graph g = SmallMlp();
  RecordingAllocator memory;
  memory.fail = true;
  auto placed = PlacedExecutor(g, memory);
  EXPECT_EQ(PlacedGradients(g, 16, placed.get()).size(), 4u);
  EXPECT_EQ(memory.allocations, 0);
}

// A variable read by two nodes: its gradient is the sum of two, made in gradient memory too.
TEST(Executor, SummedGradientOfASharedVariableComesFromTheGradientAllocator) {
  Graph g(3);
  int x = *g.Input("features", DType::kF32, Shape{-1, 6});
  int labels = *g.Input("labels", DType::kI64, Shape{-1});
  int w = *g.Variable("w", DType::kF32, Shape{6, 6}, GlorotUniform(), 6, 6);
  int w_out = *g.Variable("out", DType::kF32, Shape{6, 3}, GlorotUniform(), 6, 3);
  int h = *g.Op(v1::MATMUL, {*g.Op(v1::MATMUL, {x, w}), w});
  (void)g.SetLoss(*g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {*g.Op(v1::MATMUL, {h, w_out}), labels}));
  RecordingAllocator memory;
  auto placed = PlacedExecutor(g, memory);
  std::vector<Tensor> a = PlacedGradients(g, 8, placed.get());
  ASSERT_EQ(a.size(), 2u);
  for (int v = 0; v < 2; ++v) EXPECT_EQ(memory.live.count(a[v].raw_data()), 1u) << v;
}

}  // namespace
}  // namespace lockstep::engine

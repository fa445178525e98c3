// Per-op GPU timing (GpuDevice::profiler, ExecutorOptions::gpu) on the fake "/gpu:0", whose
// timing events count the work between two marks: a profiled training step of the bench's MLP
// shape (dense 8192, relu, dense 8192, relu, dense 10; here narrower) lists every node of the
// graph with its launches, the gradient hand-offs and the optimizer's update; without a
// profiler the step records no event at all. The printed table is the kernel count per op
// that bench/gpu_runs.md compares the next GPU run against.
// It also pins the step's host waits (StreamSynchronize, EventSynchronize) at one, the result
// readback, and a bad label's failure on the GPU to the CPU's message (the device's label
// check, read back at that wait).
#include <cstdio>

#include "common/cuda/fake_cuda_api.h"
#include "engine/executor.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/device_tensor.h"
#include "engine/gpu/op_profiler.h"
#include "engine/kernels/gpu/emulated_kernels.h"
#include "engine/kernels/gpu/fake_blas_api.h"
#include "engine/model_builder.h"
#include "engine/optimizer.h"
#include "engine/variable_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::HasSubstr;

// bench/train_throughput's mlp_4096 with narrow layers (the launches do not depend on widths).
constexpr char kMlp[] = R"({
  "inputShape": [32], "seed": 1, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
  "layers": [{"dense": {"units": 64}}, {"relu": {}}, {"dense": {"units": 64}}, {"relu": {}},
             {"dense": {"units": 10}}]})";
constexpr char kSgd[] = R"({"sgd": {}, "learningRate": {"constant": {"value": 0.01}}})";

class ExecutorProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCudaApi::Options options;
    options.memory_bytes = size_t{64} << 20;
    fake_ = *FakeCudaApi::Create(options);
    context_ = *gpu::DeviceContext::Create(fake_.get(), 0);
    kernels_ = std::make_unique<gpu::EmulatedKernels>(fake_.get(), gpu::EmulatedKernels::Options{});
    blas_ = std::make_unique<gpu::FakeBlasApi>(fake_.get());
    device_.context = context_.get();
    device_.kernels = kernels_.get();
    device_.blas = blas_.get();
    graph_ = *BuildModel(*ParseModelSpecJson(kMlp));
  }

  // `steps` SGD steps on /gpu:0 (one gradient hand-off callback, as a strategy's).
  void Train(int steps) {
    VariableSet host = *VariableSet::Initialize(graph_);
    std::vector<Tensor> vars;
    for (const Tensor& t : host.tensors()) vars.push_back(*gpu::CopyToDevice(*context_, t));
    ExecutorOptions eo;
    eo.device = device_.device();
    eo.gpu = &device_;
    std::unique_ptr<Executor> exec = *Executor::Create(&graph_, eo);
    std::unique_ptr<Optimizer> opt =
        *Optimizer::Create(*ParseOptimizerSpecJson(kSgd), graph_.Variables(), &device_);
    Tensor x = Tensor::Zeros(DType::kF32, Shape{8, 32});
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = (i % 7) / 7.0f;
    Tensor y = Tensor::FromVector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, Shape{8});
    std::vector<Tensor> grads;
    for (int s = 0; s < steps; ++s) {
      StepOptions so;
      so.step = s;
      int handed = 0;
      so.on_gradient_ready = [&](int) { ++handed; };
      absl::StatusOr<StepResult> r =
          exec->ComputeGradients(vars, {{"features", x}, {"labels", y}}, so, &grads);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(handed, 6);
      ASSERT_TRUE(opt->Apply(grads, &vars).ok());
    }
    ASSERT_TRUE(context_->Synchronize().ok());
  }

  std::unique_ptr<FakeCudaApi> fake_;
  std::unique_ptr<gpu::DeviceContext> context_;
  std::unique_ptr<gpu::EmulatedKernels> kernels_;
  std::unique_ptr<gpu::FakeBlasApi> blas_;
  gpu::GpuDevice device_;
  Graph graph_;
};

TEST_F(ExecutorProfileTest, WithoutAProfilerAStepRecordsNoEvent) {
  const FakeCudaApi::Counters before = fake_->counters();
  ASSERT_NO_FATAL_FAILURE(Train(2));
  EXPECT_EQ(fake_->counters().events_recorded, before.events_recorded);
  EXPECT_EQ(fake_->counters().timing_events_created, 0);
}

TEST_F(ExecutorProfileTest, TheTableListsEveryNodeTheOptimizerAndTheHandOffs) {
  std::unique_ptr<gpu::OpProfiler> profiler =
      *gpu::OpProfiler::Create(fake_.get(), context_->stream());
  device_.profiler = profiler.get();
  ASSERT_NO_FATAL_FAILURE(Train(1));  // a warmup, forgotten
  ASSERT_TRUE(profiler->Reset().ok());
  ASSERT_NO_FATAL_FAILURE(Train(3));
  absl::StatusOr<gpu::OpProfiler::Profile> p = profiler->Finish();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->steps, 3);
  const std::string table = gpu::OpProfiler::Table(*p, "launches");
  std::printf("The MLP step's launches per node on the fake:\n%s", table.c_str());
  auto row = [&](const std::string& name) -> const gpu::OpProfiler::Row* {
    for (const auto& r : p->rows) {
      if (r.name == name) return &r;
    }
    return nullptr;
  };
  // Every node the step runs has a row with its forward call once per step; nodes with
  // trainable inputs upstream a backward call too.
  for (int i = 0; i < graph_.num_nodes(); ++i) {
    const v1::NodeDef& node = graph_.node(i);
    if (node.op() == v1::VARIABLE) continue;
    SCOPED_TRACE(node.name());
    const gpu::OpProfiler::Row* r = row(node.name());
    ASSERT_NE(r, nullptr) << table;
    EXPECT_EQ(r->op, v1::OpType_Name(node.op()));
    EXPECT_EQ(r->calls[0], 3);
    if (node.op() == v1::MATMUL || node.op() == v1::BIAS_ADD) {
      EXPECT_EQ(r->calls[1], 3);
      EXPECT_GT(r->ms[0] + r->ms[1], 0) << "no launch counted";
    }
  }
  for (const char* name : {"optimizer apply", "gradient hand-off (all-reduce)", "loss readback"}) {
    EXPECT_NE(row(name), nullptr) << name << "\n" << table;
  }
  // SGD: one Axpy per variable (6), per step.
  EXPECT_EQ(row("optimizer apply")->ms[2], 3 * 6);
  EXPECT_EQ(row("gradient hand-off (all-reduce)")->calls[2], 3 * 6);
  EXPECT_THAT(table, HasSubstr("| total per step (3 steps)"));
}

// The host waits for the device once per step: the loss readback. A wait in the middle of the
// step (a kernel copying a tensor back to look at it) would stall the GPU's pipeline, since
// the host enqueues nothing while the device drains; this counts them on the fake.
TEST_F(ExecutorProfileTest, AStepWaitsForTheDeviceOnceAtTheLossReadback) {
  ASSERT_NO_FATAL_FAILURE(Train(1));  // first-step allocations
  const FakeCudaApi::Counters before = fake_->counters();
  ASSERT_NO_FATAL_FAILURE(Train(3));
  const FakeCudaApi::Counters after = fake_->counters();
  // Train ends with one Synchronize of its own, after the steps.
  EXPECT_EQ(after.host_waits - before.host_waits, 3 * 1 + 1);
  std::printf("host waits per step: %.2f; device->host copies per step: %.2f\n",
              (after.host_waits - before.host_waits - 1) / 3.0,
              (after.pageable_copies - before.pageable_copies) / 3.0);
}

// A label outside [0, classes) fails the step on fake /gpu:0 with /cpu:0's message, found by
// the device's check at the step's one wait (the kernels clamp it meanwhile).
TEST_F(ExecutorProfileTest, AnOutOfRangeLabelFailsTheStepAsOnTheCpu) {
  VariableSet host = *VariableSet::Initialize(graph_);
  std::vector<Tensor> vars;
  for (const Tensor& t : host.tensors()) vars.push_back(*gpu::CopyToDevice(*context_, t));
  Tensor x = Tensor::Zeros(DType::kF32, Shape{4, 32});
  Tensor y = Tensor::FromVector<int64_t>({0, 1, 12, -1}, Shape{4});
  StepOptions so;
  std::vector<Tensor> grads;
  std::unique_ptr<Executor> cpu = *Executor::Create(&graph_, ExecutorOptions{});
  absl::StatusOr<StepResult> want =
      cpu->ComputeGradients(host.tensors(), {{"features", x}, {"labels", y}}, so, &grads);
  ASSERT_FALSE(want.ok());
  EXPECT_EQ(want.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(want.status().message(), HasSubstr("label 12 at batch row 2 is outside [0, 10)"));
  ExecutorOptions eo;
  eo.device = device_.device();
  eo.gpu = &device_;
  std::unique_ptr<Executor> exec = *Executor::Create(&graph_, eo);
  absl::StatusOr<StepResult> got =
      exec->ComputeGradients(vars, {{"features", x}, {"labels", y}}, so, &grads);
  EXPECT_EQ(got.status(), want.status());
  // The executor stays usable: a good batch trains next.
  y = Tensor::FromVector<int64_t>({0, 1, 2, 3}, Shape{4});
  got = exec->ComputeGradients(vars, {{"features", x}, {"labels", y}}, so, &grads);
  EXPECT_TRUE(got.ok()) << got.status();
}

}  // namespace
}  // namespace lockstep::engine

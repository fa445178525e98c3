// Executor: runs a Graph on one device for one replica: the forward pass, and reverse-mode
// autodiff (the backward pass) giving the gradient of the scalar loss with respect to every
// trainable variable. It does not own or update variables: the caller passes their values
// in (VariableSet) and applies the gradients with an Optimizer, so that a distribution
// layer can all-reduce the gradients in between:
//
//   Executor::ComputeGradients(vars, feeds, step, &grads)   per replica
//       -> step.on_gradient_ready(i) as each grads[i] becomes final (reverse layer order)
//   all-reduce grads (outside the engine)
//   Optimizer::Apply(grads, &vars)
//
// Determinism: the same graph, variables, feeds and StepOptions give bitwise the same loss
// and gradients whatever the number of replicas or threads (BLAS runs with a fixed thread
// count; kernels are sequential; dropout masks come from Philox keyed by the graph seed,
// replica id, step and node).
//
// Devices: on "/gpu:N" (ExecutorOptions::gpu names the device's handles, which the caller
// owns) every kernel is the op's CUDA kernel, every buffer is device memory from the device's
// allocator, and the executor's own arithmetic (summing a gradient's contributions, the loss
// seed, scaling state updates) runs as GpuKernels on the device's stream. Variables must
// already be on the device (gpu::CopyToDevice: they are the caller's, like their optimizer
// state); feeds already on the device (a prefetching input pipeline's) are read in place, host
// feeds are copied to the device, explicitly, as they enter; the loss and accuracy come back
// to the host together, in one copy and one synchronisation per step (which also gives the
// host feeds' buffers back), and Evaluate's output is a host copy.
// Gradients handed out are device tensors, ordered on the device's stream.
//
// Executors only read variables: several (one per replica thread) may share one
// VariableSet concurrently, as CentralStorage does, while no Optimizer::Apply runs.
//
// Ownership: the Graph must outlive the Executor. Output tensors are the caller's; the
// executor reuses its internal buffers between steps only when nobody else holds them.
// Thread model: one thread at a time per Executor (one Executor per replica thread).
#ifndef LOCKSTEP_ENGINE_EXECUTOR_H_
#define LOCKSTEP_ENGINE_EXECUTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/device.h"
#include "engine/gpu/gpu_device.h"
#include "engine/gpu/op_profiler.h"
#include "engine/graph.h"
#include "engine/op_kernel.h"
#include "engine/tensor.h"

namespace lockstep::engine {

// Tensors fed to INPUT nodes by name, e.g. {{"features", x}, {"labels", y}}.
using Feeds = std::vector<std::pair<std::string, Tensor>>;

struct ExecutorOptions {
  Device device = Device::Cpu();
  // OpenBLAS threads. OpenBLAS's setting is process-wide: every executor of a process
  // should use the same value (the default, 1, suits one replica thread per core).
  int blas_threads = 1;
  // Where the gradients of trainable variables are placed, when set. MultiWorkerMirrored
  // passes its communicator's zero-copy heap (collectives' TransportHeap), so that gradients
  // are all-reduced where the backward pass wrote them, a copy less. Pooled like every buffer.
  // On a CPU device only: a GPU's gradients are device memory.
  BufferAllocator gradient_allocator;
  // Required on "/gpu:N" (and its context's device must be N): the device's context, kernels
  // and BLAS, borrowed; they must outlive the executor. Ignored on a CPU device.
  // Per-op GPU timing: when gpu->profiler is set (gpu/op_profiler.h), each training step marks
  // every node's forward and backward kernels, each gradient hand-off (on_gradient_ready: the
  // all-reduces enqueued there) and the loss readback on the device's stream, and harvests
  // the marks' times after its synchronisation. Unset: no event and no other cost.
  const gpu::GpuDevice* gpu = nullptr;
};

struct StepOptions {
  bool training = true;  // dropout active
  int replica_id = 0;    // dropout streams differ per replica
  int64_t step = 0;      // and per step
  // The backward pass starts from d(loss) = loss_scale. To sum per-replica gradients
  // into the global-batch mean, pass local_batch / global_batch and all-reduce with SUM
  // (tf.nn.compute_average_loss); the reported loss stays the local mean.
  double loss_scale = 1.0;
  // Called (on the calling thread) as soon as gradient `variable_index` is final, in
  // reverse graph order, while the rest of the backward pass is still to run. The tensor
  // is exclusively the caller's from then on (it may be all-reduced in place).
  std::function<void(int variable_index)> on_gradient_ready;
  // Handed to the kernels (KernelContext): sums over the replicas of a sync group, for
  // synchronized batch normalization; and the batch standing in for an empty one.
  std::function<absl::Status(Tensor* values)> cross_replica_sum;
  bool phantom_batch = false;
};

struct StepResult {
  double loss = 0;
  double accuracy = -1;    // fraction correct, or -1 when the graph has no ACCURACY node
  int64_t batch_size = 0;  // leading dimension of the first feed
};

class Executor {
 public:
  // Kernels come from the graph's OpRegistry. UNIMPLEMENTED when an op has no kernel for
  // `options.device`'s type (naming the op, the node and the device); INVALID_ARGUMENT when a
  // kernel refuses the node (e.g. a CUDA kernel an f64 graph), or for "/gpu:N" without
  // ExecutorOptions::gpu or with another GPU's.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Graph* graph,
                                                          ExecutorOptions options = {});

  // Forward and backward pass. `variables` follow graph.Variables() order (a
  // VariableSet's tensors()); `gradients` is resized to match, with an invalid Tensor for
  // non-trainable variables, except those a kernel updates (batch norm's moving statistics):
  // their entry is the update, a delta times loss_scale, handed out (on_gradient_ready)
  // after the trainable ones, so that all-reducing it with SUM like a gradient averages the
  // replicas' updates, and Optimizer::Apply adds it. Errors: INVALID_ARGUMENT for a missing feed, a
  // variable or feed of the wrong shape or dtype, or on another device, labels out of range;
  // FAILED_PRECONDITION when the graph has no loss; on a GPU, the device's errors
  // (RESOURCE_EXHAUSTED when its memory runs out, a sticky INTERNAL after a kernel fault).
  absl::StatusOr<StepResult> ComputeGradients(const std::vector<Tensor>& variables,
                                              const Feeds& feeds, const StepOptions& options,
                                              std::vector<Tensor>* gradients);

  // Forward pass only (no dropout). Computes the loss and accuracy when the labels are
  // fed, and the model output into *output when it is not null.
  absl::StatusOr<StepResult> Evaluate(const std::vector<Tensor>& variables, const Feeds& feeds,
                                      Tensor* output = nullptr);

  const Graph& graph() const { return *graph_; }
  const std::vector<VariableInfo>& variables() const { return variables_; }

 private:
  Executor(const Graph* graph, ExecutorOptions options);
  absl::Status Forward(const std::vector<Tensor>& variables, const Feeds& feeds,
                       const std::vector<bool>& wanted, const KernelContext& ctx);
  absl::Status Backward(const KernelContext& ctx, const StepOptions& options,
                        std::vector<Tensor>* gradients);
  // Marks the nodes `targets` depend on.
  std::vector<bool> Ancestors(std::vector<int> targets) const;
  // From the pool; `gradient`: a variable's gradient (gradient_allocator's memory).
  Tensor Allocate(DType dtype, const Shape& shape, bool gradient = false);
  // Whether graph node `node` is a trainable variable.
  bool IsTrainableVariable(int node) const;
  bool OnGpu() const { return options_.device.type() == Device::Type::kCuda; }
  // The loss and the accuracy (each when wanted and the graph has it) into `result`: on a GPU
  // both copied back at once, then one synchronisation, after which the step's host feeds are
  // the caller's again.
  absl::Status ReadResults(bool loss, bool accuracy, StepResult* result);
  // a + b into a fresh buffer, on the executor's device.
  absl::StatusOr<Tensor> Sum(const Tensor& a, const Tensor& b, bool gradient);
  // The tensor the kernels see for a feed or variable: host feeds move to the GPU here.
  absl::StatusOr<Tensor> OnDevice(const Tensor& t, absl::string_view what);
  KernelContext MakeContext(bool training, uint64_t dropout_key);
  // A profiler mark (see ExecutorOptions::gpu) during a training step; nothing otherwise.
  absl::Status Mark(absl::string_view name, absl::string_view op, gpu::OpProfiler::Phase phase,
                    bool call = true);

  const Graph* graph_;
  ExecutorOptions options_;
  std::vector<VariableInfo> variables_;
  std::vector<int> variable_index_;                 // node -> index in variables_, or -1
  std::vector<std::unique_ptr<OpKernel>> kernels_;  // per node; null for INPUT/VARIABLE
  std::vector<bool> needs_grad_;                    // node depends on a trainable variable
  std::vector<int> gradient_final_after_;           // variable -> node after whose backward its
                                                    // gradient is final (-1: not reached)
  std::vector<Tensor> values_;                      // per node, the current step's outputs
  std::vector<Tensor> grads_;                       // per node, d(loss)/d(output)
  std::vector<Tensor> state_updates_;               // per variable, this step's delta
  // Reusable buffers, each with the last run that used it. A buffer is free when the pool
  // holds its only reference; free buffers unused for a whole run are released, so a
  // one-off shape (a last partial batch) does not pin memory.
  struct PooledBuffer {
    Tensor tensor;
    int64_t last_run = 0;
    bool gradient = false;  // from (or meant for) options_.gradient_allocator
  };
  std::vector<PooledBuffer> pool_;
  // Why the last device allocation failed (Allocate returns an invalid tensor then).
  absl::Status allocation_status_;
  float seed_host_ = 0;                // the loss seed's host side while its copy is in flight
  alignas(8) char readback_[16] = {};  // the loss and accuracy copied back (ReadResults)
  // This run's device checks (KernelContext::defer_device_check): each flag's value lands in
  // `value` at ReadResults' one wait.
  struct DeviceCheck {
    Tensor flag;
    std::function<absl::Status(int64_t)> explain;
    int64_t value = 0;
  };
  std::vector<DeviceCheck> checks_;
  int64_t run_ = 0;                     // counts ComputeGradients and Evaluate calls
  gpu::OpProfiler* marking_ = nullptr;  // the device's profiler during ComputeGradients
  void TrimPool();
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_EXECUTOR_H_

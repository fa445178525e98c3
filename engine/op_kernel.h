// OpKernel: the forward and gradient computation of one graph node on one device.
//
// The executor owns one kernel per node (made by the factory its op registered for the
// device, OpRegistry::CreateKernel; a CUDA kernel implements the same interface), calls Forward in
// topological order and Backward in reverse. Kernels allocate their outputs through the
// KernelContext's allocator (buffers are reused across steps: a kernel must overwrite
// every element it returns) and never write to their inputs: gradients returned may alias
// `d_output` (e.g. Add, Reshape). Thread model: a kernel is used by one thread at a time.
#ifndef LOCKSTEP_ENGINE_OP_KERNEL_H_
#define LOCKSTEP_ENGINE_OP_KERNEL_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/gpu/gpu_device.h"
#include "engine/tensor.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

struct KernelContext {
  // Returns a tensor of this dtype and shape; its contents are unspecified.
  std::function<Tensor(DType, const Shape&)> allocate;
  // Backward: like `allocate`, for the gradient of input `input`. The executor places the
  // gradients of variables in the memory the caller asked for
  // (ExecutorOptions::gradient_allocator). Kernels call AllocateInputGradient.
  std::function<Tensor(int input, DType, const Shape&)> allocate_input_gradient;
  Tensor AllocateInputGradient(int input, DType dtype, const Shape& shape) const {
    return allocate_input_gradient ? allocate_input_gradient(input, dtype, shape)
                                   : allocate(dtype, shape);
  }
  // Backward: a kernel may call InputGradientDone(i) as soon as (*d_inputs)[i] is final and
  // before it computes the others. The executor then hands a variable's finished gradient
  // out at once (StepOptions::on_gradient_ready), so that its all-reduce overlaps the rest of
  // the node's backward pass (a MatMul's dW leaves before its dX is computed). Optional: the
  // executor takes every gradient when Backward returns.
  std::function<void(int input)> input_gradient_done;
  void InputGradientDone(int input) const {
    if (input_gradient_done) input_gradient_done(input);
  }
  // Forward, training: a kernel that keeps statistics in non-trainable variable inputs
  // (BATCH_NORM's moving mean and variance) reports how much input `input` should change
  // (a delta, shaped like it). The executor hands it out as that variable's "gradient"
  // (ComputeGradients), scaled like the gradients, and the Optimizer adds it.
  std::function<void(int input, Tensor delta)> update_state;
  void UpdateState(int input, Tensor delta) const {
    if (update_state) update_state(input, std::move(delta));
  }
  // GPU: a check the device computes during the step instead of the host waiting for it mid-
  // step. `flag` is a one-element kI64 device tensor that the kernel's enqueued work writes (0:
  // passed); the executor copies it back with the step's results, at the step's one wait, and
  // a nonzero value fails the step (or Evaluate) with explain(value), which may copy what it
  // needs back (an error path). Empty: the caller reads no flags; the kernel checks by itself.
  std::function<void(Tensor flag, std::function<absl::Status(int64_t)> explain)> defer_device_check;
  // Training in a sync group of several replicas (a distribution strategy's step): sums
  // `values` element-wise over every replica of every worker, in place. A collective: every
  // replica makes the same calls (dtypes, shapes) in graph order, so only graph-determined
  // code may call it. Empty: this replica trains alone and its sums are its own. Errors are
  // the collectives' (DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED).
  std::function<absl::Status(Tensor* values)> cross_replica_sum;
  absl::Status SumOverReplicas(Tensor* values) const {
    return cross_replica_sum ? cross_replica_sum(values) : absl::OkStatus();
  }
  // The batch stands in for a replica that has no examples this step (past the end of a
  // partial global batch) so that it still makes every cross_replica_sum call: a kernel
  // that calls it contributes nothing to the sums and returns zero input gradients.
  bool phantom_batch = false;
  bool training = false;
  // Dropout masks: Philox keyed by MixKey(dropout_key, node index), counter = element.
  uint64_t dropout_key = 0;
  int node_index = 0;
  // The graph's precision (Graph::precision): BF16_MIXED makes the GEMM-class kernels round
  // their products' operands to bf16 (engine/ops/products.h); every other kernel ignores it.
  v1::Precision::Mode precision = v1::Precision::PRECISION_UNSPECIFIED;
  // The GPU a CUDA kernel runs on (its stream, kernels and BLAS): the executor's
  // ExecutorOptions::gpu, borrowed. Null on a CPU device.
  const gpu::GpuDevice* gpu = nullptr;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> inputs,
                               Tensor* output) = 0;
  // Sets (*d_inputs)[i] for every i with need[i]; leaves the others untouched.
  virtual absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> inputs,
                                const Tensor& output, const Tensor& d_output,
                                const std::vector<bool>& need, std::vector<Tensor>* d_inputs) = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OP_KERNEL_H_

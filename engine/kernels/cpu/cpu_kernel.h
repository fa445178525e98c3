// The CPU implementation of every op (forward and gradient), in f32 and f64; MatMul and
// Conv2D go through CBLAS. CreateCpuKernel is the CPU device's kernel factory (a switch
// over OpType, no registry); kernels/cuda will offer CreateCudaKernel alongside it.
#ifndef LOCKSTEP_ENGINE_KERNELS_CPU_CPU_KERNEL_H_
#define LOCKSTEP_ENGINE_KERNELS_CPU_CPU_KERNEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/dtype.h"
#include "engine/op_kernel.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

// `compute_dtype` is the dtype of the node's floating inputs (f32 or f64).
// INVALID_ARGUMENT for INPUT/VARIABLE (the executor feeds those) or another dtype.
absl::StatusOr<std::unique_ptr<OpKernel>> CreateCpuKernel(const v1::NodeDef& node,
                                                          DType compute_dtype);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_KERNELS_CPU_CPU_KERNEL_H_

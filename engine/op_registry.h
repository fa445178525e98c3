// OpRegistry: everything the engine knows about each op, in one place: how many inputs it
// takes, its shape function (output shape and dtype from the inputs', used by Graph at
// build time with -1 batch dimensions and by kernels at run time with concrete shapes) and
// its kernel factory per device type (a kernel computes the forward pass and the gradient,
// OpKernel::Forward / Backward). Each op registers itself from its own file under
// engine/ops/ (BuiltinOps() in engine/ops/builtin_ops.h builds the registry of them all);
// a new device adds its factory to the ops it supports, a new op adds one file.
//
// No process-wide instance: a Graph owns (shares) the registry it was built with, and the
// Executor asks the graph's registry for kernels. Thread model: filled on one thread by
// Register; a filled registry is immutable and may be read from any thread.
#ifndef LOCKSTEP_ENGINE_OP_REGISTRY_H_
#define LOCKSTEP_ENGINE_OP_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/op_kernel.h"
#include "engine/shape_inference.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

// Output shape and dtype from the node's attributes and its inputs' shapes and dtypes;
// INVALID_ARGUMENT naming the node and the mismatch (ShapeError in shape_inference.h).
using ShapeFn = std::function<absl::StatusOr<TypedShape>(const v1::NodeDef& node,
                                                         const std::vector<TypedShape>& inputs)>;
// A kernel for one node; `compute_dtype` is the dtype of its floating inputs.
using KernelFactory = std::function<absl::StatusOr<std::unique_ptr<OpKernel>>(
    const v1::NodeDef& node, DType compute_dtype)>;

struct OpDef {
  v1::OpType op = v1::OP_UNSPECIFIED;
  int num_inputs = 1;  // kVariadic: one or more
  ShapeFn shape;
  std::map<Device::Type, KernelFactory> kernels;  // none for INPUT and VARIABLE

  static constexpr int kVariadic = -1;
};

class OpRegistry {
 public:
  // What MustRegister (must_register.h) registers, and names in its abort message.
  using Def = OpDef;
  static constexpr char kName[] = "engine op registry";

  // ALREADY_EXISTS when the op is registered twice, INVALID_ARGUMENT without a shape
  // function.
  absl::Status Register(OpDef def);
  // Null when the op is not registered.
  const OpDef* Find(v1::OpType op) const;
  std::vector<v1::OpType> ops() const;

  // Checks the input count, then runs the op's shape function. INVALID_ARGUMENT naming the
  // node for an unknown op, a wrong input count or what the shape function refuses.
  absl::StatusOr<TypedShape> InferOutput(const v1::NodeDef& node,
                                         const std::vector<TypedShape>& inputs) const;
  // UNIMPLEMENTED when the op has no kernel for `device`; INVALID_ARGUMENT for an unknown
  // op or what the factory refuses (e.g. a dtype it does not compute in).
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernel(Device::Type device,
                                                         const v1::NodeDef& node,
                                                         DType compute_dtype) const;

 private:
  std::map<v1::OpType, OpDef> ops_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OP_REGISTRY_H_

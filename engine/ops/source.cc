// INPUT and VARIABLE: a node's declared shape and dtype. No kernels: the executor feeds
// inputs and passes variables in.
#include "engine/ops/builtin_ops.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> DeclaredShape(const v1::NodeDef& node, const std::vector<TypedShape>&) {
  auto dtype = DTypeFromProto(node.dtype());
  if (!dtype.ok()) return ShapeError(node, dtype.status().message());
  return TypedShape{Shape::FromProto(node.shape()), *dtype};
}

}  // namespace

void RegisterSourceOps(OpRegistry* r) {
  for (v1::OpType op : {v1::INPUT, v1::VARIABLE}) {
    OpDef def;
    def.op = op;
    def.num_inputs = 0;
    def.shape = DeclaredShape;
    MustRegister(r, std::move(def));
  }
}

}  // namespace lockstep::engine

// The engine's edge between DType (common/dtype.h: the one element type of tensors and
// collective buffers) and lockstep.v1.DType, the wire enum of proto/lockstep/v1/tensor.proto.
// This is the one conversion between them: tensors are serialised and checkpoints read here.
#ifndef LOCKSTEP_ENGINE_DTYPE_H_
#define LOCKSTEP_ENGINE_DTYPE_H_

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "lockstep/v1/tensor.pb.h"

namespace lockstep::engine {

v1::DType DTypeToProto(DType dtype);
// INVALID_ARGUMENT for DTYPE_UNSPECIFIED or an unknown value.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_DTYPE_H_

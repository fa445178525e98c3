#include "collectives/types.h"

namespace lockstep {
namespace collectives {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMean:
      return "mean";
  }
  return "?";
}

const char* CompressionName(Compression compression) {
  return compression == Compression::kBF16 ? "bf16" : "none";
}

const char* TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kInProc:
      return "inproc";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kShm:
      return "shm";
  }
  return "?";
}

}  // namespace collectives
}  // namespace lockstep

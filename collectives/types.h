// The reduction operators, transports, algorithms and compressions of the collectives, and
// their names. The element type is DType (common/dtype.h), the one engine/'s tensors use too.
//
// `collectives` never includes engine/: callers hand in raw buffers (void* + count + DType).
#ifndef LOCKSTEP_COLLECTIVES_TYPES_H_
#define LOCKSTEP_COLLECTIVES_TYPES_H_

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace lockstep {
namespace collectives {

// kMean is kSum followed by a division by the world size (integer division for integers).
enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kMean };

// Which transport a communicator runs over. kAuto: shared memory when every rank is on this
// host (seen through the rendezvous Store), TCP otherwise.
enum class TransportKind : uint8_t { kAuto, kInProc, kTcp, kShm };

// How AllReduce is computed. kAuto chooses by message size (see algorithms.h).
enum class AllReduceAlgorithm : uint8_t { kAuto, kRing, kHalvingDoubling, kRecursiveDoubling };

// How FusedAllReduce sends f32 tensors (the gradients of a step). kBF16: rounded to bf16
// (to nearest even) for the all-reduce and widened back to f32 after it, half the bytes on
// the wire (Horovod's Compression.fp16, PyTorch DDP's bf16_compress_hook). Other dtypes
// travel as they are.
enum class Compression : uint8_t { kNone, kBF16 };

const char* ReduceOpName(ReduceOp op);
const char* TransportKindName(TransportKind kind);
const char* CompressionName(Compression compression);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TYPES_H_

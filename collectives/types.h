// Element types and reduction operators of the collectives, and their sizes and names.
//
// `collectives` never includes engine/: callers hand in raw buffers (void* + count + DType).
// DType mirrors lockstep.v1.DType's numeric kinds; conversion from the proto lives with the
// caller that has both (distribute/), to keep this package free of proto dependencies.
#ifndef LOCKSTEP_COLLECTIVES_TYPES_H_
#define LOCKSTEP_COLLECTIVES_TYPES_H_

#include <cstddef>
#include <cstdint>

namespace lockstep {
namespace collectives {

// f16 and bf16 are reduced in f32 and rounded back after every pairwise step.
enum class DType : uint8_t { kF32, kF64, kF16, kBF16, kI32, kI64 };

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

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);
const char* ReduceOpName(ReduceOp op);
const char* TransportKindName(TransportKind kind);
const char* CompressionName(Compression compression);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TYPES_H_

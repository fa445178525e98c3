// The collective algorithms, written against Transport only (no transport is special-cased
// here). Every function runs one collective on the calling thread and returns the first
// transport error, annotated with the algorithm and rank.
//
// AllReduce and AllReducePieces are the one all-reduce dispatch, for contiguous vectors and
// fused buckets alike: they cut segments and pick the algorithm by size as tuning.h says
// (ChooseAllReduce, under options from ResolveAlgorithmOptions; AlgorithmOptions::algorithm
// forces one).
//
// Reduction order is fixed by (rank, world size, count, algorithm), so results are bitwise
// identical on every rank and every run.
//
// Thread model: functions on the caller's thread; one collective at a time per Transport.
#ifndef LOCKSTEP_COLLECTIVES_ALGORITHMS_ALGORITHMS_H_
#define LOCKSTEP_COLLECTIVES_ALGORITHMS_ALGORITHMS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectives/algorithms/tuning.h"
#include "collectives/transport/transport.h"
#include "collectives/types.h"

namespace lockstep {
namespace collectives {

// The ring order that makes ranks pinned to the same CPU neighbours: ranks sorted by
// (cpu, rank), where cpus[r] is the one CPU rank r is pinned to, or -1 when it is not
// pinned to one; empty (rank order) when any rank is unpinned or every rank has its own CPU
// (then every order crosses CPUs alike).
std::vector<int> RingOrderForCpus(const std::vector<int>& cpus);

// In place on `buf` (count elements), by the algorithm that options (resolved) choose for
// its size, in segments of options.segment_bytes when set. kMean divides at the end.
absl::Status AllReduce(Transport& t, const AlgorithmOptions& options, void* buf, size_t count,
                       DType dtype, ReduceOp op, absl::Time deadline);
// The same for the vector made of `pieces` end to end (a fused bucket), reduced where the
// pieces lie (zero-copy fusion): the same blocks, segments and reduction order, so bitwise the
// same result as AllReduce of the concatenation, without packing it. A message that spans
// several pieces is sent as one scattered message (SendRecv's pieces), not one per piece;
// recursive doubling still lands the partner's vector in one scratch buffer.
// INVALID_ARGUMENT unless every piece is a whole number of `dtype` elements with a buffer.
absl::Status AllReducePieces(Transport& t, const AlgorithmOptions& options,
                             absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                             absl::Time deadline);
// INVALID_ARGUMENT unless every piece is a whole number of `dtype` elements with a buffer.
absl::Status CheckPieces(absl::Span<const BufferPiece> pieces, DType dtype);

// `buf` on `root` is sent to every rank. Binomial tree for small messages, pipelined chain
// for large.
absl::Status Broadcast(Transport& t, const AlgorithmOptions& options, void* buf, size_t bytes,
                       int root, absl::Time deadline);

// Ring all-gather: `buf` holds size() blocks of `block_bytes`; block rank() is this rank's
// input, the others are filled in.
absl::Status RingAllGather(Transport& t, size_t chunk_bytes, void* buf, size_t block_bytes,
                           absl::Time deadline);

// Ring reduce-scatter: `buf` holds size() blocks of `block_count` elements; on return block
// rank() holds the reduction of every rank's block rank() (other blocks are scratch).
absl::Status RingReduceScatter(Transport& t, size_t chunk_bytes, void* buf, size_t block_count,
                               DType dtype, ReduceOp op, absl::Time deadline);

// Dissemination barrier: ceil(log2 n) rounds of one byte.
absl::Status DisseminationBarrier(Transport& t, absl::Time deadline);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_ALGORITHMS_ALGORITHMS_H_

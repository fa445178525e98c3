// The collective algorithms, written against Transport only (no transport is special-cased
// here). Every function runs one collective on the calling thread and returns the first
// transport error, annotated with the algorithm and rank.
//
// Choosing the all-reduce algorithm (ChooseAllReduce) is done here and only here:
//   - recursive doubling below `doubling_threshold_bytes`: log2(n) exchanges of the whole
//     vector, the fewest round trips (one for n = 2), for latency-bound tiny messages;
//   - recursive halving-doubling (Rabenseifner; non-powers of two fold the extra ranks into
//     their neighbours first) for messages below `ring_threshold_bytes`: 2 log2(n) steps,
//     latency-bound sizes;
//   - ring (reduce-scatter + all-gather, each step split into `chunk_bytes` segments and
//     reduced as bytes arrive) above it: 2(n-1)/n * S bytes per rank, bandwidth-optimal.
// Thresholds, measured with bench/allreduce (n=4, 2-core machine shared with other jobs,
// see bench/allreduce_bench.cc; n=2 barely cares: every algorithm does one or two exchanges):
//   TCP: recursive doubling fastest below ~32 KiB (61 us vs 104-150 us for halving-doubling;
//        with two ranks below 1 MiB, kTcpPairDoublingThresholdBytes),
//        halving-doubling up to ~1 MiB (64 KiB: 185 us vs 268 us ring; 2 MiB with more than
//        two ranks, kTcpRingThresholdBytes), ring above.
//   shm: recursive doubling below ~8 KiB (8 B: 5.8 us vs 12 us), halving-doubling up to
//        ~64 KiB, ring above (256 KiB: 93 us vs 135 us; 1 MiB: 0.29 ms vs 3.8 ms).
// The k* values below are chosen per transport and world size in one place,
// ResolveAlgorithmOptions; a value the caller set is never replaced.
//
// Reduction order is fixed by (rank, world size, count, algorithm), so results are bitwise
// identical on every rank and every run.
#ifndef LOCKSTEP_COLLECTIVES_ALGORITHMS_H_
#define LOCKSTEP_COLLECTIVES_ALGORITHMS_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectives/transport.h"
#include "collectives/types.h"

namespace lockstep {
namespace collectives {

constexpr size_t kDefaultChunkBytes = 4 << 20;
constexpr size_t kDefaultRingThresholdBytes = 1 << 20;
constexpr size_t kDefaultDoublingThresholdBytes = 32 << 10;
constexpr size_t kShmRingThresholdBytes = 64 << 10;
// Shared memory with a power of two above two ranks (others would fold a rank's whole vector
// into a neighbour first; unmeasured): halving-doubling up to 8 MiB, ring above. Its
// 2 log2(n) exchanges beat the ring's 2(n-1) steps, and its first halving pairs rank r with
// r ^ (n/2), which shares r's CPU when ranks are pinned round robin (the bench; n=4 on 2
// CPUs), so the largest exchange stays on one core. Measured, bench/allreduce n=4 on 2 cores,
// 3 interleaved sweeps each, rank 0's medians, ring vs halving-doubling: CPUs on different L3s
// 512 KiB 325-401 vs 205-209 us, 1 MiB 653-695 vs 420-444, 2 MiB 1383-1450 vs 823-972,
// 4 MiB 2322-2439 vs 2167-2397, 8 MiB 3481-3696 vs 3317-4262, 16 MiB 5350-5888 vs
// 5443-5637; CPUs on one L3 2 MiB 334-353 vs 217-241, 4 MiB 362-372 vs 336-378, 16 MiB 4785
// vs 3756-4426, 64 MiB 22827 vs 22693-24320 (64 MiB in split placement: ring ahead).
constexpr size_t kShmManyRanksRingThresholdBytes = 8 << 20;
constexpr size_t kShmDoublingThresholdBytes = 8 << 10;
constexpr size_t kDefaultBroadcastChainThresholdBytes = 256 << 10;
// TCP with two ranks: recursive doubling (one exchange of the whole vector each way, each
// side reducing all of it) below 1 MiB, the ring from 1 MiB on (then each exchange is half
// the vector, and the ring reduces as bytes arrive). Two ranks move the same bytes in every
// algorithm, and one full-duplex exchange beats halving-doubling's two half-size ones.
// The ring runs in kDefaultChunkBytes messages, not in 256 KiB segments that stop the
// exchange at every segment. Measured n=2 (bench/allreduce, 3-6 interleaved runs, rank 0's
// per-run medians; small messages padded, a 2 MiB send window, tcp_transport.h): recursive
// doubling vs halving-doubling 256 KiB 48-61 vs 62-86 us (one 169), 512 KiB 86-110 (one 340)
// vs 112-130 us; the ring in 4 MiB vs 256 KiB messages 1 MiB 172-179 (one 657) vs 217-268 us,
// 2 MiB 307-422 vs 433-562 us, 4 MiB 629-895 vs 918-1153 us; recursive doubling up to 4 MiB
// instead lost at 2 MiB (351-481 us) and 4 MiB (1039-1533 us).
constexpr size_t kTcpPairDoublingThresholdBytes = 1 << 20;
// TCP with more than two ranks: halving-doubling up to 2 MiB. Its 2 log2(n) exchanges with one
// partner each beat the ring's 2(n-1) steps at 1 MiB (n=4 on 2 cores, 4 interleaved runs,
// medians: 0.74 ms vs 1.00 ms); from 2 MiB on the ring is as fast or faster.
constexpr size_t kTcpRingThresholdBytes = 2 << 20;
// TCP with more than two ranks: larger all-reduces run as consecutive 1 MiB halving-doubling
// all-reduces (AlgorithmOptions::segment_bytes): past ~2 MiB both algorithms slow down per byte
// (n=4 on 2 cores: four ranks' buffers and socket queues leave the 2 MiB L2 of each core).
constexpr size_t kTcpSegmentBytes = 1 << 20;

// A size in AlgorithmOptions left at this takes the value measured for the transport and
// world size (ResolveAlgorithmOptions); any other value is the caller's and is kept, also one
// that equals a measured value.
constexpr size_t kTransportChoice = ~size_t{0};

struct AlgorithmOptions {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  size_t chunk_bytes = kTransportChoice;  // ring and chain segment size
  size_t ring_threshold_bytes = kTransportChoice;
  size_t doubling_threshold_bytes = kTransportChoice;
  size_t broadcast_chain_threshold_bytes = kTransportChoice;
  // > 0: with kAuto, all-reduces larger than this run as consecutive all-reduces of
  // segments of this size (each choosing its algorithm by its own size). 0: one piece.
  size_t segment_bytes = kTransportChoice;
  // > 0: the communicator's thread asks the kernel for scheduler slices this short
  // (common/sched.h), so that a wake-up from a peer preempts the compute threads it shares
  // its cores with instead of waiting out their slice. Zero keeps the kernel's default.
  absl::Duration progress_thread_slice = absl::ZeroDuration();
  // The ring all-reduce's order: ring_order[i] is the rank at position i, each rank once;
  // empty: rank order. Ranks that share a core or a cache should be neighbours, so that
  // most ring steps stay inside it (CreateCommunicator orders ranks pinned to one CPU each
  // by that CPU; RingOrderForCpus). Every rank must be given the same order. Measured, n=4
  // over shm pinned round robin on 2 CPUs (bench/allreduce, interleaved sweeps, rank 0's
  // medians), order 0,2,1,3 vs rank order: CPUs on different L3s, 128 KiB 120-125 vs
  // 145-171 us, 1 MiB 800-840 vs 982-1152 us, 2 MiB 1.63-1.64 vs 2.14-2.18 ms; on one L3,
  // 1 MiB 185-208 vs 225-236 us, 4 MiB 395-444 vs 445-506 us.
  std::vector<int> ring_order;
};

// The ring order that makes ranks pinned to the same CPU neighbours: ranks sorted by
// (cpu, rank), where cpus[r] is the one CPU rank r is pinned to, or -1 when it is not
// pinned to one; empty (rank order) when any rank is unpinned or every rank has its own CPU
// (then every order crosses CPUs alike).
std::vector<int> RingOrderForCpus(const std::vector<int>& cpus);

// `options` with every kTransportChoice size replaced by the value measured for `transport`
// and `world_size` (the k* constants above); kAuto and kInProc get the defaults (TCP's for
// groups of any size). CreateCommunicator resolves for the transport it made, and
// Communicator::Create resolves what is left, so the algorithms see no kTransportChoice.
AlgorithmOptions ResolveAlgorithmOptions(AlgorithmOptions options, TransportKind transport,
                                         int world_size);

// The all-reduce algorithm for `bytes` under resolved `options` (whose thresholds already
// depend on the world size, ResolveAlgorithmOptions).
AllReduceAlgorithm ChooseAllReduce(const AlgorithmOptions& options, int world_size, size_t bytes);

// In place on `buf` (count elements). kMean divides at the end.
absl::Status AllReduce(Transport& t, const AlgorithmOptions& options, void* buf, size_t count,
                       DType dtype, ReduceOp op, absl::Time deadline);
absl::Status RingAllReduce(Transport& t, size_t chunk_bytes, void* buf, size_t count, DType dtype,
                           ReduceOp op, absl::Time deadline);
// Ring all-reduce of the vector made of `pieces` end to end, reduced where the pieces lie
// (zero-copy fusion: a bucket of tensors is never packed). Same blocks, same reduction order
// and so bitwise the same result as RingAllReduce of the concatenation. Messages are the
// same `chunk_bytes` segments as for the concatenation: one that spans several pieces is
// sent as one scattered message (SendRecv's pieces), not one message per piece.
// INVALID_ARGUMENT unless every piece is a whole number of `dtype` elements with a buffer.
absl::Status CheckPieces(absl::Span<const BufferPiece> pieces, DType dtype);
absl::Status RingAllReducePieces(Transport& t, size_t chunk_bytes,
                                 absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                                 absl::Time deadline);
// The same in options.ring_order (rank order when it is empty), with options.chunk_bytes.
absl::Status RingAllReducePieces(Transport& t, const AlgorithmOptions& options,
                                 absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                                 absl::Time deadline);
absl::Status RecursiveDoublingAllReduce(Transport& t, void* buf, size_t count, DType dtype,
                                        ReduceOp op, absl::Time deadline);
// Recursive doubling of the vector made of `pieces` end to end, reduced where the pieces lie:
// bitwise the same result as RecursiveDoublingAllReduce of the concatenation, without packing
// it (the partner's vector still lands in one scratch buffer).
absl::Status RecursiveDoublingAllReducePieces(Transport& t, absl::Span<const BufferPiece> pieces,
                                              DType dtype, ReduceOp op, absl::Time deadline);
absl::Status HalvingDoublingAllReduce(Transport& t, void* buf, size_t count, DType dtype,
                                      ReduceOp op, absl::Time deadline);
// Halving-doubling of the vector made of `pieces` end to end, reduced where the pieces lie
// (as RingAllReducePieces): bitwise the same result as HalvingDoublingAllReduce of the
// concatenation, without packing it.
absl::Status HalvingDoublingAllReducePieces(Transport& t, absl::Span<const BufferPiece> pieces,
                                            DType dtype, ReduceOp op, absl::Time deadline);

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

#endif  // LOCKSTEP_COLLECTIVES_ALGORITHMS_H_

// `lockstep bench allreduce`: starts N local processes (forked from this one before any
// thread exists), all-reduces float32 SUM over TCP or shared memory for every size, runs the
// Gloo and Open MPI peer programs (bench/peers) with the same sizes, and prints an
// nccl-tests-style table with the ratio to every peer, then the fusion measurement.
//
//   --np N  --transport tcp|shm  [--sizes 8:64M] [--iters K (max timed calls per size)]
//   [--peers all|none|mpi|gloo] [--peers_dir DIR] [--algorithm auto|ring|hd]
//   [--fusion true|false] [--target_s 0.25] [--bytes_per_pack N] [--bind auto|true|false]
//   [--rounds R (default 1)] [--json_out PATH (every round's rows, one JSON object a line)]
//   tuning: [--chunk_bytes N] [--ring_threshold_bytes N] [--doubling_threshold_bytes N]
//   [--segment_bytes N] [--shm_spin N]
//   [--shm_yield N]
//           [--shm_heap true|false] (shm: buffers in the zero-copy heap, read in place by
//            peers; default true; false: ordinary memory, every message through the rings)
//           [--shm_direct_bytes N] (ShmOptions::direct_threshold_bytes; 0: its default)
//           [--shm_cma_bytes N] (single-copy CMA from N bytes; 0: off; needs --shm_heap false)
//           [--shm_ring_bytes N] (per-pair ring; 0: the default)
//           [--tcp_congestion LIST] (TcpOptions::congestion_control; "" the system's)
//           [--tcp_buffer_bytes N] [--tcp_busy_polls N] [--tcp_send_window_bytes N]
//           [--encrypt] (TCP: AES-256-GCM, as a job's communication.encrypt)
//
// argv[0] is skipped (the program or subcommand name). Ranks follow the peers' measuring
// rules (allreduce_rank.h). --bind auto pins rank r to CPU r mod ncpu for shm, as Open MPI
// binds its ranks by default (measured here: 8 B p50 0.9 us pinned vs 18.6 us unpinned at
// n=2); TCP ranks stay unpinned (pinning made loopback TCP 2-4x slower above 1 MiB).
// Rounds: each round runs our ranks and then every peer (odd rounds: the peers first), one
// at a time. The host moves this VM's vCPUs between placements that share an L3 and
// placements that do not, and every implementation's times move with it (5-8x at 256 KiB
// over shm), so figures from different placements do not compare. Every sweep is bracketed
// by the core-to-core probe (core_latency.h) and filed under its placement; the output has
// one table per placement, whose times are medians over that placement's sweeps and whose
// ratios compare only those. A sweep during which the placement changed is shown apart.
// Use --rounds 5 for figures worth reporting.
//
// Returns the process exit status (0 ok, 1 a rank failed or results were wrong, 2 bad
// flags). Call it before starting any thread: it forks.
#ifndef LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_BENCH_H_
#define LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {
namespace bench {

int RunAllreduceBench(int argc, char** argv);

// "MIN:MAX" with binary K/M/G suffixes, doubling from MIN to MAX (nccl-tests -b -e -f 2).
absl::StatusOr<std::vector<uint64_t>> ParseSizes(const std::string& spec);

}  // namespace bench
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_BENCH_H_

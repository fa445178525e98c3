// One rank of `lockstep bench allreduce`: joins the group through a FileStore, measures
// every size with the same rules as the peer programs in bench/peers (README there):
//   data: rank r holds (r + 1) * (1 + i % 7) (float32 SUM, exact); the first call is
//   checked on every rank; then a few untimed warm-up calls (at most ~128 MiB of them), one
//   barrier, and K back-to-back calls timed one by one on rank 0, K filling `target_s` at
//   the warm-up's pace (rank 0 decides and broadcasts it), at least 5, at most max_iters.
// Then the fusion measurement: 100 tensors of 40 KiB, 100 separate calls vs one
// FusedAllReduce, and that FusedAllReduce with bf16 compression (communication.compression). Rank 0
// writes one JSON object per line to `results_path`. Thread model: runs on the calling thread of a
// freshly forked process.
#ifndef LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_RANK_H_
#define LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_RANK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collectives/bench/peer_measurement.h"
#include "collectives/types.h"

namespace lockstep {
namespace bench {

struct RankConfig {
  int rank = 0;
  int np = 2;
  collectives::TransportKind transport = collectives::TransportKind::kShm;
  collectives::AllReduceAlgorithm algorithm = collectives::AllReduceAlgorithm::kAuto;
  std::string store_dir;
  std::string key_prefix;
  std::string secret;
  std::vector<uint64_t> sizes;
  int max_iters = 1000;
  int warmup = 5;
  double target_s = 0.25;
  bool fusion = true;
  std::string results_path;
  // Tuning knobs (0: the library's defaults).
  int shm_spin = -1;
  int shm_yield = -1;
  size_t shm_cma_bytes = 0;          // ShmOptions::cma_threshold_bytes
  bool shm_heap = false;             // buffers in the shm transport's zero-copy heap
  size_t shm_direct_bytes = 0;       // ShmOptions::direct_threshold_bytes; 0: its default
  size_t shm_ring_bytes = 0;         // ShmOptions::ring_bytes; 0: its default
  std::string tcp_congestion = "-";  // TcpOptions::congestion_control; "-": its default
  size_t chunk_bytes = 0;
  size_t ring_threshold_bytes = 0;
  size_t doubling_threshold_bytes = 0;
  size_t segment_bytes = 0;  // > 0: AlgorithmOptions::segment_bytes
  int tcp_buffer_bytes = -1;
  int tcp_busy_polls = -1;
  int64_t tcp_send_window_bytes = -1;  // >= 0: TcpOptions::send_window_bytes
  bool encrypt = false;                // TcpOptions::encrypt
  size_t bytes_per_pack = 4 << 20;
};

absl::Status RunBenchRank(const RankConfig& config);

// The warm-up and timed-iteration rules (WarmupIters, ChooseTimedIters) are the peers' own,
// from bench/peers/peer_measurement.h, so that every row of the table is measured alike.

}  // namespace bench
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_BENCH_ALLREDUCE_RANK_H_

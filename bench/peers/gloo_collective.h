// PeerCollective over Gloo (Debian libgloo-dev): TCP transport on 127.0.0.1, rendezvous
// through a gloo::rendezvous::FileStore in a directory shared by the ranks of one run.
//
// Ownership: owns the Gloo context and the algorithm objects built on it. Thread model:
// one instance per rank process, used from one thread. Gloo reports errors by throwing;
// every method catches and returns a status naming the rank, so no exception escapes.
#ifndef LOCKSTEP_BENCH_PEERS_GLOO_COLLECTIVE_H_
#define LOCKSTEP_BENCH_PEERS_GLOO_COLLECTIVE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/peers/peer_sweep.h"

namespace gloo {
class Algorithm;
class Context;
}  // namespace gloo

namespace lockstep::bench {

class GlooCollective final : public PeerCollective {
 public:
  enum class Algorithm { kRingChunked, kHalvingDoubling };

  // Connects rank `rank` of `np` to the others (full mesh). Fails with UNAVAILABLE when
  // the peers do not show up within `timeout`, which also bounds every later call.
  static absl::StatusOr<std::unique_ptr<GlooCollective>> Create(int rank, int np,
                                                                const std::string& store_dir,
                                                                Algorithm algorithm,
                                                                absl::Duration timeout);
  ~GlooCollective() override;

  int rank() const override { return rank_; }
  int size() const override { return np_; }
  absl::Status Prepare(float* data, uint64_t count) override;
  absl::Status AllReduce() override;
  absl::Status Barrier() override;
  absl::StatusOr<int> BroadcastFromRank0(int value) override;
  absl::StatusOr<int> SumOverRanks(int value) override;
  // Through the rendezvous FileStore, not the Gloo connections: Gloo's closing barrier can
  // return on one rank while another still waits on a pair whose socket the first then
  // closes ("Connection closed by peer", 1-2 runs in a few hundred).
  absl::Status Leave() override;

 private:
  GlooCollective(int rank, int np, Algorithm algorithm, std::string store_dir,
                 absl::Duration timeout, std::shared_ptr<gloo::Context> context);

  const int rank_;
  const int np_;
  const Algorithm algorithm_;
  const std::string store_dir_;
  const absl::Duration timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<gloo::Algorithm> allreduce_;  // Bound by Prepare.
  std::unique_ptr<gloo::Algorithm> barrier_;
  int broadcast_value_ = 0;
  std::unique_ptr<gloo::Algorithm> broadcast_;  // Of broadcast_value_.
  float sum_value_ = 0;
  std::unique_ptr<gloo::Algorithm> sum_;  // Of sum_value_ (small integers are exact).
};

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_PEERS_GLOO_COLLECTIVE_H_

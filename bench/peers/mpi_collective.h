// PeerCollective over Open MPI (Debian libopenmpi-dev): MPI_Allreduce(MPI_IN_PLACE,
// MPI_FLOAT, MPI_SUM) on MPI_COMM_WORLD, with whatever transport mpirun selected.
//
// Ownership: Create calls MPI_Init and the destructor MPI_Finalize, so at most one
// instance may exist per process. Thread model: used from one thread (MPI_THREAD_SINGLE).
// MPI errors abort the job (MPI_ERRORS_ARE_FATAL), and mpirun then stops every rank.
#ifndef LOCKSTEP_BENCH_PEERS_MPI_COLLECTIVE_H_
#define LOCKSTEP_BENCH_PEERS_MPI_COLLECTIVE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "bench/peers/peer_sweep.h"

namespace lockstep::bench {

class MpiCollective final : public PeerCollective {
 public:
  // Initialises MPI; fails with FAILED_PRECONDITION when the world size is not `np`.
  static absl::StatusOr<std::unique_ptr<MpiCollective>> Create(int np);
  ~MpiCollective() override;

  int rank() const override { return rank_; }
  int size() const override { return np_; }
  absl::Status Prepare(float* data, uint64_t count) override;
  absl::Status AllReduce() override;
  absl::Status Barrier() override;
  absl::StatusOr<int> BroadcastFromRank0(int value) override;
  absl::StatusOr<int> SumOverRanks(int value) override;

 private:
  MpiCollective(int rank, int np) : rank_(rank), np_(np) {}
  absl::Status Check(int mpi_result, const char* what) const;

  const int rank_;
  const int np_;
  float* data_ = nullptr;  // Bound by Prepare; not owned.
  int count_ = 0;
};

}  // namespace lockstep::bench

#endif  // LOCKSTEP_BENCH_PEERS_MPI_COLLECTIVE_H_

#include "bench/peers/mpi_collective.h"

#include <openmpi/mpi.h>

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::bench {

absl::StatusOr<std::unique_ptr<MpiCollective>> MpiCollective::Create(int np) {
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    return absl::UnavailableError("MPI_Init failed; run under mpirun");
  }
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<MpiCollective> collective(new MpiCollective(rank, size));
  if (size != np) {
    return absl::FailedPreconditionError(
        absl::StrCat("mpi rank ", rank, ": MPI world has ", size, " ranks but --np is ", np,
                     "; start it as `mpirun -np ", np, " ...` or without mpirun"));
  }
  return collective;
}

MpiCollective::~MpiCollective() { MPI_Finalize(); }

absl::Status MpiCollective::Check(int mpi_result, const char* what) const {
  if (mpi_result == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(mpi_result, text, &length);
  return absl::UnavailableError(
      absl::StrCat("mpi rank ", rank_, ": ", what, " failed: ", absl::string_view(text, length)));
}

absl::Status MpiCollective::Prepare(float* data, uint64_t count) {
  if (count > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("MPI counts are int: at most 2^31-1 elements, asked for ", count));
  }
  data_ = data;
  count_ = static_cast<int>(count);
  return absl::OkStatus();
}

absl::Status MpiCollective::AllReduce() {
  return Check(MPI_Allreduce(MPI_IN_PLACE, data_, count_, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
               "MPI_Allreduce");
}

absl::Status MpiCollective::Barrier() { return Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

absl::StatusOr<int> MpiCollective::BroadcastFromRank0(int value) {
  absl::Status status = Check(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (!status.ok()) return status;
  return value;
}

absl::StatusOr<int> MpiCollective::SumOverRanks(int value) {
  absl::Status status = Check(
      MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  if (!status.ok()) return status;
  return value;
}

}  // namespace lockstep::bench

// mpi_allreduce: the Open MPI all-reduce peer benchmark (see bench/peers/README.md).
//
//   mpi_allreduce --np 2 --sizes 8:64M --iters 1000 --btl vader
//
// Started plainly, it re-executes itself under
//   mpirun --allow-run-as-root --oversubscribe -np N --mca pml ob1 --mca btl self,<btl>
// (and --mca btl_tcp_if_include lo for tcp), so callers use one command for every peer.
// Under mpirun (OMPI_COMM_WORLD_SIZE is set) it is one rank: MPI_Allreduce(MPI_IN_PLACE,
// float, SUM). Rank 0 prints one JSON line per size on stdout; everything else on stderr.
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/peers/mpi_collective.h"
#include "bench/peers/peer_sweep.h"
#include "common/child_processes.h"

ABSL_FLAG(int, np, 2, "Number of MPI ranks to start on this machine (1..64).");
ABSL_FLAG(std::string, sizes, "8:64M",
          "MIN:MAX message sizes in bytes (K, M, G binary), doubling.");
ABSL_FLAG(int, iters, 1000, "At most this many timed iterations per size.");
ABSL_FLAG(int, min_iters, 5, "At least this many timed iterations per size (capped by --iters).");
ABSL_FLAG(int, warmup, 5, "Untimed warm-up iterations per size (fewer for large sizes).");
ABSL_FLAG(double, target_s, 0.25, "Timed work to aim for per size, in seconds.");
ABSL_FLAG(std::string, btl, "vader", "Open MPI byte transfer layer: vader (shared memory) or tcp.");
ABSL_FLAG(std::string, mpirun, "mpirun", "The mpirun to launch the ranks with.");
ABSL_FLAG(int, timeout_s, 300, "Kill every rank and fail if the run takes longer.");

namespace lockstep::bench {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "mpi_allreduce: %s\n", message.c_str());
  return 2;
}

// Re-executes this program with the same arguments under mpirun, supervised.
int LaunchUnderMpirun(int argc, char** argv, int np, const std::string& btl, int timeout_s) {
  char exe[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length <= 0) return Fail("cannot read /proc/self/exe to re-execute under mpirun");
  exe[length] = '\0';
  std::vector<std::string> command = {absl::GetFlag(FLAGS_mpirun),
                                      "--allow-run-as-root",
                                      "--oversubscribe",
                                      "-np",
                                      absl::StrCat(np),
                                      "--mca",
                                      "pml",
                                      "ob1",
                                      "--mca",
                                      "btl",
                                      "self," + btl};
  if (btl == "tcp") {
    command.insert(command.end(), {"--mca", "btl_tcp_if_include", "lo"});
  }
  command.push_back(exe);
  for (int i = 1; i < argc; ++i) command.push_back(argv[i]);
  // Open MPI refuses to run as root without both of these (or --allow-run-as-root).
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", /*overwrite=*/0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", /*overwrite=*/0);

  absl::Status status;
  {
    ChildProcesses children;
    status = children.Exec("mpirun", command).status();
    // The ranks' own alarm fires first; this also covers a stuck mpirun.
    if (status.ok()) status = children.WaitAll(absl::Seconds(timeout_s + 10));
    if (absl::IsDeadlineExceeded(status)) {
      status = absl::DeadlineExceededError(
          absl::StrCat(status.message(),
                       " (--timeout_s): raise --timeout_s for long sweeps, or look above "
                       "for a rank stuck in rendezvous"));
    }
  }
  if (!status.ok()) return Fail(status.ToString());
  return 0;
}

int RunRank(int np, const PeerSweepOptions& options, int timeout_s) {
  alarm(timeout_s);  // A stuck rank dies, and mpirun then stops the others.
  absl::StatusOr<std::unique_ptr<MpiCollective>> collective = MpiCollective::Create(np);
  if (!collective.ok()) return Fail(collective.status().ToString());
  absl::StatusOr<int> wrong_sizes = RunPeerSweep(**collective, options, stdout);
  if (!wrong_sizes.ok()) return Fail(wrong_sizes.status().ToString());
  if (*wrong_sizes > 0) {
    std::fprintf(stderr, "mpi_allreduce rank %d: wrong results at %d sizes\n",
                 (*collective)->rank(), *wrong_sizes);
    return 3;
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage("mpi_allreduce --np N --sizes MIN:MAX --iters K --btl vader|tcp");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) return Fail(absl::StrCat("unexpected argument '", rest[1], "'"));
  const int np = absl::GetFlag(FLAGS_np);
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  const std::string btl = absl::GetFlag(FLAGS_btl);
  if (np < 1 || np > 64) return Fail(absl::StrCat("--np must be in 1..64, got ", np));
  if (timeout_s < 1) return Fail("--timeout_s must be positive");
  if (btl != "vader" && btl != "tcp") {
    return Fail(absl::StrCat("--btl must be vader or tcp, got '", btl, "'"));
  }
  absl::StatusOr<PeerSweepOptions> options = MakePeerSweepOptions(
      "mpi_" + btl, absl::GetFlag(FLAGS_sizes), absl::GetFlag(FLAGS_iters),
      absl::GetFlag(FLAGS_min_iters), absl::GetFlag(FLAGS_warmup), absl::GetFlag(FLAGS_target_s));
  if (!options.ok()) return Fail(std::string(options.status().message()));
  if (getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    return LaunchUnderMpirun(argc, argv, np, btl, timeout_s);
  }
  return RunRank(np, *options, timeout_s);
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }

// gloo_allreduce: the Gloo all-reduce peer benchmark (see bench/peers/README.md).
//
//   gloo_allreduce --np 2 --sizes 8:64M --iters 1000 --algorithm ring_chunked
//
// Forks --np rank processes on this machine; they meet through a FileStore in a fresh
// temporary directory and talk Gloo's TCP transport over 127.0.0.1. Rank 0 prints one
// JSON line per size on stdout; everything else goes to stderr.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/peers/gloo_collective.h"
#include "bench/peers/peer_sweep.h"
#include "common/child_processes.h"

ABSL_FLAG(int, np, 2, "Number of rank processes to start on this machine (1..64).");
ABSL_FLAG(std::string, sizes, "8:64M",
          "MIN:MAX message sizes in bytes (K, M, G binary), doubling.");
ABSL_FLAG(int, iters, 1000, "At most this many timed iterations per size.");
ABSL_FLAG(int, min_iters, 5, "At least this many timed iterations per size (capped by --iters).");
ABSL_FLAG(int, warmup, 5, "Untimed warm-up iterations per size (fewer for large sizes).");
ABSL_FLAG(double, target_s, 0.25, "Timed work to aim for per size, in seconds.");
ABSL_FLAG(std::string, algorithm, "ring_chunked", "ring_chunked or halving_doubling.");
ABSL_FLAG(int, timeout_s, 300, "Kill every rank and fail if the run takes longer.");

namespace lockstep::bench {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "gloo_allreduce: %s\n", message.c_str());
  return 2;
}

int RunRank(int rank, int np, const std::string& store_dir, GlooCollective::Algorithm algorithm,
            const PeerSweepOptions& options, int timeout_s) {
  alarm(timeout_s);  // Last resort: a rank never outlives the watchdog.
  absl::StatusOr<std::unique_ptr<GlooCollective>> collective =
      GlooCollective::Create(rank, np, store_dir, algorithm, absl::Seconds(timeout_s));
  if (!collective.ok()) {
    std::fprintf(stderr, "gloo_allreduce: %s\n", collective.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<int> wrong_sizes = RunPeerSweep(**collective, options, stdout);
  if (!wrong_sizes.ok()) {
    std::fprintf(stderr, "gloo_allreduce: %s\n", wrong_sizes.status().ToString().c_str());
    return 1;
  }
  if (*wrong_sizes > 0) {
    std::fprintf(stderr, "gloo_allreduce rank %d: wrong results at %d sizes\n", rank, *wrong_sizes);
    return 3;
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gloo_allreduce --np N --sizes MIN:MAX --iters K --algorithm ring_chunked|halving_doubling");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) return Fail(absl::StrCat("unexpected argument '", rest[1], "'"));
  const int np = absl::GetFlag(FLAGS_np);
  const int timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (np < 1 || np > 64) return Fail(absl::StrCat("--np must be in 1..64, got ", np));
  if (timeout_s < 1) return Fail("--timeout_s must be positive");
  GlooCollective::Algorithm algorithm;
  const std::string algorithm_name = absl::GetFlag(FLAGS_algorithm);
  if (algorithm_name == "ring_chunked") {
    algorithm = GlooCollective::Algorithm::kRingChunked;
  } else if (algorithm_name == "halving_doubling") {
    algorithm = GlooCollective::Algorithm::kHalvingDoubling;
  } else {
    return Fail(absl::StrCat("--algorithm must be ring_chunked or halving_doubling, got '",
                             algorithm_name, "'"));
  }
  absl::StatusOr<PeerSweepOptions> options = MakePeerSweepOptions(
      "gloo_" + algorithm_name, absl::GetFlag(FLAGS_sizes), absl::GetFlag(FLAGS_iters),
      absl::GetFlag(FLAGS_min_iters), absl::GetFlag(FLAGS_warmup), absl::GetFlag(FLAGS_target_s));
  if (!options.ok()) return Fail(std::string(options.status().message()));

  std::string store_dir =
      absl::StrCat(std::filesystem::temp_directory_path().string(), "/gloo_allreduce.XXXXXX");
  if (mkdtemp(store_dir.data()) == nullptr) {
    return Fail(
        absl::StrCat("cannot create a rendezvous directory like ", store_dir, "; check TMPDIR"));
  }
  absl::Status status;
  {
    ChildProcesses children;
    for (int rank = 0; rank < np && status.ok(); ++rank) {
      status =
          children
              .Fork(absl::StrCat("gloo rank ", rank),
                    [&] { return RunRank(rank, np, store_dir, algorithm, *options, timeout_s); })
              .status();
    }
    if (status.ok()) status = children.WaitAll(absl::Seconds(timeout_s));
    if (absl::IsDeadlineExceeded(status)) {
      status = absl::DeadlineExceededError(
          absl::StrCat(status.message(),
                       " (--timeout_s): raise --timeout_s for long sweeps, or look above "
                       "for a rank stuck in rendezvous"));
    }
  }  // Every rank is reaped here.
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);
  if (!status.ok()) return Fail(status.ToString());
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }

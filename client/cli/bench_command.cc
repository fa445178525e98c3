#include "client/cli/bench_command.h"

#include <string>

#include "collectives/bench/allreduce_bench.h"
#include "engine/kernels/cpu/blas.h"

namespace lockstep {
namespace cli {

std::optional<int> RunBenchIfAsked(int argc, char** argv) {
  if (argc < 3 || std::string(argv[1]) != "bench" || std::string(argv[2]) != "allreduce") {
    return std::nullopt;
  }
  // This binary links OpenBLAS, whose idle thread pool would compete with the ranks for
  // the cores (measured: ~1.8x slower over shm at 256 KiB..1 MiB). Stop it before forking.
  engine::cpu::SetBlasThreads(1);
  // argv + 2 starts at "allreduce", which the benchmark skips as its program name.
  return bench::RunAllreduceBench(argc - 2, argv + 2);
}

Command BenchCommand() {
  Command c;
  c.name = "bench";
  c.usage = "bench allreduce --np=N --transport=tcp|shm [--sizes=8:64M] [--iters=K]";
  c.summary =
      "All-reduce benchmark: N local processes, an nccl-tests-style table, and the ratio to "
      "Gloo and Open MPI measured in the same run (`lockstep bench allreduce --help`).";
  c.run = [](const CommandArgs&, const CommandContext& ctx) {
    *ctx.err << "usage: lockstep " << BenchCommand().usage << "\n";
    return 2;
  };
  return c;
}

}  // namespace cli
}  // namespace lockstep

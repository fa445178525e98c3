// `lockstep bench allreduce ...`: the all-reduce benchmark against Gloo and Open MPI
// (bench/allreduce_bench.h). It forks its ranks, so it runs before anything starts a
// thread, and it parses its own flags: RunBenchIfAsked is called first thing in main().
#ifndef LOCKSTEP_CLIENT_CLI_BENCH_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_BENCH_COMMAND_H_

#include <optional>

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

// For `lockstep bench allreduce ARGS`: runs the benchmark and returns its exit status.
// Otherwise nullopt (the command goes through Dispatch as usual).
std::optional<int> RunBenchIfAsked(int argc, char** argv);

// The entry in `lockstep help`; run directly it explains the sub-benchmarks.
Command BenchCommand();

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_BENCH_COMMAND_H_

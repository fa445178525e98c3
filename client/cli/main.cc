// lockstep: the command line for users and operators. Each subcommand lives in
// client/cli/<name>_command.{h,cc}; add it to the list below.
#include "client/cli/bench_command.h"
#include "client/cli/certs_command.h"
#include "client/cli/command.h"
#include "client/cli/diagnose_commands.h"
#include "client/cli/export_command.h"
#include "client/cli/job_commands.h"
#include "client/cli/local_command.h"
#include "client/cli/status_command.h"
#include "common/process.h"

int main(int argc, char** argv) {
  lockstep::InitProcess();
  // Before anything else: the benchmark forks its ranks and parses its own flags.
  if (auto status = lockstep::cli::RunBenchIfAsked(argc, argv)) return *status;
  using namespace lockstep::cli;  // NOLINT: the list reads better without prefixes
  std::vector<Command> commands = {
      StatusCommand(),   SubmitCommand(), WatchCommand(), JobsCommand(),
      DescribeCommand(), CancelCommand(), DrainCommand(), ReleaseCommand(),
      LocalCommand(),    BenchCommand(),  CertsCommand(), ExportCommand(),
  };
  AddDiagnoseCommands(&commands);
  return Dispatch(argc, argv, commands);
}

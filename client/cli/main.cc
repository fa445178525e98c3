// lockstep: the command line for users and operators. Each subcommand lives in
// client/cli/<name>_command.{h,cc}; add it to the list below.
#include "client/cli/command.h"
#include "client/cli/job_commands.h"
#include "client/cli/local_command.h"
#include "client/cli/status_command.h"

int main(int argc, char** argv) {
  using namespace lockstep::cli;  // NOLINT: the list reads better without prefixes
  const std::vector<Command> commands = {
      StatusCommand(),   SubmitCommand(), WatchCommand(), JobsCommand(),
      DescribeCommand(), CancelCommand(), LocalCommand(),
  };
  return Dispatch(argc, argv, commands);
}

// The job subcommands: `submit`, `watch`, `jobs`, `describe`, `cancel`, `drain`, `release`
// (client/job_service_client.h underneath, from cli::Connect). WatchToEnd is shared with
// `lockstep local`.
#ifndef LOCKSTEP_CLIENT_CLI_JOB_COMMANDS_H_
#define LOCKSTEP_CLIENT_CLI_JOB_COMMANDS_H_

#include <string>

#include "client/cli/command.h"
#include "client/job_service_client.h"

namespace lockstep {
namespace cli {

Command SubmitCommand();
Command WatchCommand();
Command JobsCommand();
Command DescribeCommand();
Command CancelCommand();
Command DrainCommand();
Command ReleaseCommand();

// Follows job `id` until it ends: a live progress bar when `live` (a terminal), plain
// lines otherwise; then the final figures and the checkpoint and summary paths. Returns
// kExitOk when the job SUCCEEDED, kExitFailure otherwise; the final record in `*final`
// when given.
// `stop` (may be null) ends the watch early once the stream breaks (lockstep local: Ctrl-C).
int WatchToEnd(client::JobServiceClient& jobs, const std::string& id, const CommandContext& ctx,
               bool live, v1::JobRecord* final = nullptr,
               const std::function<bool()>& stop = nullptr);

// Whether ctx.out is this process's stdout and a terminal.
bool IsTerminal(const CommandContext& ctx);

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_JOB_COMMANDS_H_

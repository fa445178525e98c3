// The diagnostics subcommands (DESIGN.md, "When a job hangs"):
//   dump JOB                          every rank's flight record and the verdict, as JSON
//   logs JOB [--worker N] [--follow]  the workers' log lines of the job; --follow streams
//                                     new ones until the job ends
// They call the coordinator's DumpJob and GetJobLogs RPCs (viewer role) through the
// JobServiceClient that cli::Connect gives (connection.h).
#ifndef LOCKSTEP_CLIENT_CLI_DIAGNOSE_COMMANDS_H_
#define LOCKSTEP_CLIENT_CLI_DIAGNOSE_COMMANDS_H_

#include <vector>

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

Command DumpCommand();
Command LogsCommand();
// Appends both to `commands`.
void AddDiagnoseCommands(std::vector<Command>* commands);

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_DIAGNOSE_COMMANDS_H_

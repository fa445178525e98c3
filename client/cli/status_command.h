// `lockstep status`: the cluster as the coordinator sees it, as a table or as JSON.
#ifndef LOCKSTEP_CLIENT_CLI_STATUS_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_STATUS_COMMAND_H_

#include "client/cli/command.h"
#include "client/cli/connection.h"

namespace lockstep {
namespace cli {

Command StatusCommand();

// Under --insecure, says on stderr that nothing is authenticated.
void WarnIfInsecure(const Connection& connection, const CommandContext& ctx);

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_STATUS_COMMAND_H_

// `lockstep status`: the cluster as the coordinator sees it, as a table or as JSON.
#ifndef LOCKSTEP_CLIENT_CLI_STATUS_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_STATUS_COMMAND_H_

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

Command StatusCommand();

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_STATUS_COMMAND_H_

// `lockstep local`: a whole cluster on this machine (a coordinator and N workers on
// loopback), for a first try and for development.
#ifndef LOCKSTEP_CLIENT_CLI_LOCAL_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_LOCAL_COMMAND_H_

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

Command LocalCommand();

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_LOCAL_COMMAND_H_

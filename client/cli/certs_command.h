// `lockstep certs`: the cluster's TLS material, made with OpenSSL (common/certs.h).
//   certs init --dir=D                       a new CA: D/ca.key, D/ca.crt
//   certs issue --dir=D --name=N [--san=..]  a daemon certificate (coordinator or lockstepd)
//   certs issue --dir=D --name=N --client [--role=viewer|operator]   a client certificate
//   certs token                              a new random bearer token for --tokens_file
#ifndef LOCKSTEP_CLIENT_CLI_CERTS_COMMAND_H_
#define LOCKSTEP_CLIENT_CLI_CERTS_COMMAND_H_

#include "client/cli/command.h"

namespace lockstep {
namespace cli {

Command CertsCommand();

}  // namespace cli
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_CLI_CERTS_COMMAND_H_

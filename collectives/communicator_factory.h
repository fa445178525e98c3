// CreateCommunicator: the one call worker code makes to join a collective group. It picks and
// connects the transport through the rendezvous Store and returns a ready Communicator.
//
// Store keys used, all under `config.key_prefix` (scope it by job, attempt and group name so
// that a restarted attempt never meets the old one):
//   <prefix>/host/<rank>  host identity (boot id + IPC namespace), for kAuto
//   <prefix>/tcp/<rank>   "host:port" a rank listens on
//   <prefix>/shm/<rank>   the name of a rank's shared-memory segment
// kAuto: shared memory when every rank reports the same host identity, else TCP.
// Errors: INVALID_ARGUMENT (rank, size, missing hub or secret), DEADLINE_EXCEEDED when peers
// do not show up by `connect_timeout`, UNAVAILABLE, UNAUTHENTICATED never (a peer with a
// wrong secret is refused and logged, and the group waits for the right one).
#ifndef LOCKSTEP_COLLECTIVES_COMMUNICATOR_FACTORY_H_
#define LOCKSTEP_COLLECTIVES_COMMUNICATOR_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/communicator.h"
#include "collectives/store.h"
#include "collectives/transport/inproc/inproc_transport.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "collectives/types.h"

namespace lockstep {
namespace collectives {

struct CommunicatorConfig {
  int rank = 0;
  int world_size = 1;
  TransportKind transport = TransportKind::kAuto;
  // The group's secret (e.g. the job's): TCP peers prove they know it (HMAC-SHA256).
  std::string secret;
  std::string key_prefix = "collectives";
  // TCP: the address this rank listens on and publishes to its peers.
  std::string listen_host = "127.0.0.1";
  absl::Duration connect_timeout = absl::Seconds(60);
  AlgorithmOptions algorithms;
  TcpOptions tcp;  // listen_host above overrides tcp.listen_host
  ShmOptions shm;
  // kInProc only: the hub shared by the group's threads.
  std::shared_ptr<InProcHub> inproc_hub;
  // Told what the communicator runs and moves (collective_observer.h: a flight recorder,
  // metrics, or a CollectiveObserverList of both); optional, must outlive the communicator.
  CollectiveObserver* observer = nullptr;
};

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommunicatorConfig& config,
                                                                 Store* store);

// OK when a TCP rank could listen on host:port now (port 0: always; the socket is closed
// again): what a daemon checks at start for its fixed data port. FAILED_PRECONDITION when the
// port is in use, INVALID_ARGUMENT outside 0..65535.
absl::Status CheckListenPort(const std::string& host, int port);

// This host's identity as used by kAuto (boot id and IPC namespace).
std::string HostIdentity();

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_COMMUNICATOR_FACTORY_H_

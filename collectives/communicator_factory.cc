#include "collectives/communicator_factory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/transport/tcp/socket_util.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "common/sched.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {
namespace {

absl::StatusOr<TransportKind> ResolveAuto(const CommunicatorConfig& config, Store* store,
                                          absl::Time deadline) {
  const std::string mine = HostIdentity();
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(config.key_prefix, "/host/", config.rank), mine));
  for (int r = 0; r < config.world_size; ++r) {
    LS_ASSIGN_OR_RETURN(std::string other,
                        store->Get(absl::StrCat(config.key_prefix, "/host/", r), deadline));
    if (other != mine) return TransportKind::kTcp;
  }
  return TransportKind::kShm;
}

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const CommunicatorConfig& config,
                                                         TransportKind kind, Store* store,
                                                         absl::Time deadline) {
  switch (kind) {
    case TransportKind::kInProc:
      if (config.inproc_hub == nullptr || config.inproc_hub->world_size() != config.world_size) {
        return absl::InvalidArgumentError(
            "in-process transport needs an InProcHub of the group's world size");
      }
      return std::unique_ptr<Transport>(
          std::make_unique<InProcTransport>(config.inproc_hub, config.rank));
    case TransportKind::kTcp: {
      if (config.secret.empty()) {
        return absl::InvalidArgumentError("TCP transport needs the group's secret");
      }
      HandshakeIdentity me{config.secret, config.key_prefix, config.rank, config.world_size};
      TcpOptions tcp = config.tcp;
      tcp.listen_host = config.listen_host;
      LS_ASSIGN_OR_RETURN(auto t,
                          TcpTransport::Connect(me, config.key_prefix, store, tcp, deadline));
      return std::unique_ptr<Transport>(std::move(t));
    }
    case TransportKind::kShm: {
      LS_ASSIGN_OR_RETURN(
          auto t, ShmTransport::Connect(config.rank, config.world_size, config.key_prefix, store,
                                        config.shm, deadline));
      return std::unique_ptr<Transport>(std::move(t));
    }
    default:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("transport ", TransportKindName(kind), " is not available"));
}

// The one CPU this thread may run on, or -1.
int PinnedCpu() {
  const std::vector<int> cpus = AllowedCpus();
  return cpus.size() == 1 ? cpus[0] : -1;
}

}  // namespace

absl::Status CheckListenPort(const std::string& host, int port) {
  if (port == 0) return absl::OkStatus();
  return Listen(host, port, /*backlog=*/1).status();
}

std::string HostIdentity() {
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);
  char ns[256] = {0};
  ssize_t n = readlink("/proc/self/ns/ipc", ns, sizeof(ns) - 1);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "/", boot_id, "/", n > 0 ? std::string(ns, n) : "");
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommunicatorConfig& config,
                                                                 Store* store) {
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("communicator: rank ", config.rank,
                                                   " is not in a group of ", config.world_size));
  }
  if (store == nullptr && config.transport != TransportKind::kInProc) {
    return absl::InvalidArgumentError("communicator: a rendezvous Store is required");
  }
  const absl::Time deadline = absl::Now() + config.connect_timeout;
  TransportKind kind = config.transport;
  if (kind == TransportKind::kAuto) {
    LS_ASSIGN_OR_RETURN(kind, ResolveAuto(config, store, deadline));
  }
  auto transport = MakeTransport(config, kind, store, deadline);
  if (!transport.ok()) {
    return Annotate(transport.status(),
                    absl::StrCat("rank ", config.rank, " of ", config.world_size, " (",
                                 config.key_prefix, ")"));
  }
  // Thresholds, chunks and segments measured for this transport, unless the caller chose.
  AlgorithmOptions algorithms = ResolveAlgorithmOptions(config.algorithms, kind, config.world_size);
  if (kind == TransportKind::kShm && config.world_size > 2 && algorithms.ring_order.empty()) {
    // Ranks pinned to a shared CPU become ring neighbours (AlgorithmOptions::ring_order).
    LS_RETURN_IF_ERROR(store->Set(absl::StrCat(config.key_prefix, "/cpu/", config.rank),
                                  absl::StrCat(PinnedCpu())));
    std::vector<int> cpus(config.world_size, -1);
    for (int r = 0; r < config.world_size; ++r) {
      absl::StatusOr<std::string> cpu =
          store->Get(absl::StrCat(config.key_prefix, "/cpu/", r), deadline);
      if (!cpu.ok()) {
        return Annotate(cpu.status(), absl::StrCat("rank ", config.rank, ": waiting for rank ", r,
                                                   " to publish its CPU"));
      }
      if (!absl::SimpleAtoi(*cpu, &cpus[r])) cpus[r] = -1;
    }
    algorithms.ring_order = RingOrderForCpus(cpus);
  }
  return Communicator::Create(std::move(transport).value(), algorithms, config.observer);
}

}  // namespace collectives
}  // namespace lockstep

#include "collectives/test_util.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "collectives/transport/inproc/inproc_transport.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/transport/tcp/tcp_transport.h"

namespace lockstep {
namespace collectives {
namespace {

// The scheduler state of thread `tid` of this process ('R' running, 'S' asleep, ...), or 0.
char ThreadState(pid_t tid) {
  std::ifstream in(absl::StrCat("/proc/self/task/", tid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  // "tid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

}  // namespace

void RunRanks(int n, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

std::string UniquePrefix() {
  absl::BitGen gen;
  return absl::StrCat("t", getpid(), "x", absl::Uniform<uint32_t>(gen));
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeGroup(
    TransportKind kind, int n, const AlgorithmOptions& options, const std::string& secret) {
  InMemoryStore store;
  auto hub = std::make_shared<InProcHub>(n);
  const std::string prefix = UniquePrefix();
  std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> made(n);
  RunRanks(n, [&](int r) {
    CommunicatorConfig config;
    config.rank = r;
    config.world_size = n;
    config.transport = kind;
    config.secret = secret;
    config.key_prefix = prefix;
    config.connect_timeout = absl::Seconds(20);
    config.algorithms = options;
    config.inproc_hub = hub;
    made[r] = CreateCommunicator(config, &store);
  });
  std::vector<std::unique_ptr<Communicator>> group;
  for (auto& m : made) {
    if (!m.ok()) return m.status();
    group.push_back(std::move(m).value());
  }
  return group;
}

void LogAbortLatency(const std::string& what, absl::Duration latency) {
  std::cout << what << ": returned " << absl::FormatDuration(latency) << " after Abort()"
            << std::endl;
}

WatchedTransport::WatchedTransport(std::unique_ptr<Transport> inner)
    : owned_(std::move(inner)), inner_(owned_.get()) {}

WatchedTransport::WatchedTransport(Transport* inner) : inner_(inner) {}

absl::Status WatchedTransport::SendRecv(const SendSpec& send, const RecvSpec& recv,
                                        absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    ++entered_;
    tid_ = static_cast<pid_t>(syscall(SYS_gettid));
  }
  absl::Status s = inner_->SendRecv(send, recv, deadline);
  absl::MutexLock lock(&mu_);
  ++returned_;
  return s;
}

int WatchedTransport::entered() {
  absl::MutexLock lock(&mu_);
  return entered_;
}

bool WatchedTransport::WaitUntilBlocked(absl::Time deadline) {
  while (absl::Now() < deadline) {
    pid_t tid = 0;
    {
      absl::MutexLock lock(&mu_);
      auto inside = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ > returned_; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&inside), deadline)) return false;
      tid = tid_;
    }
    // Inside the transport, nothing but a wait for a peer puts the thread to sleep. A
    // transport may spin or yield first: look again until it sleeps.
    if (ThreadState(tid) == 'S') return true;
    absl::SleepFor(absl::Microseconds(200));
  }
  return false;
}

absl::StatusOr<std::vector<std::unique_ptr<Transport>>> ConnectTransports(TransportKind kind,
                                                                          int n) {
  InMemoryStore store;
  auto hub = std::make_shared<InProcHub>(n);
  const std::string prefix = UniquePrefix();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  TcpOptions tcp;
  tcp.poll_slice = kTestTcpPollSlice;
  std::vector<absl::StatusOr<std::unique_ptr<Transport>>> made(n);
  RunRanks(n, [&](int r) -> void {
    switch (kind) {
      case TransportKind::kInProc:
        made[r] = std::unique_ptr<Transport>(std::make_unique<InProcTransport>(hub, r));
        return;
      case TransportKind::kTcp:
        made[r] =
            TcpTransport::Connect({"test-secret", prefix, r, n}, prefix, &store, tcp, deadline);
        return;
      case TransportKind::kShm:
        made[r] = ShmTransport::Connect(r, n, prefix, &store, {}, deadline);
        return;
      default:
        made[r] = absl::InvalidArgumentError(
            absl::StrCat("ConnectTransports: no transport of kind ", TransportKindName(kind)));
    }
  });
  std::vector<std::unique_ptr<Transport>> group;
  for (auto& m : made) {
    if (!m.ok()) return m.status();
    group.push_back(std::move(m).value());
  }
  return group;
}

absl::StatusOr<WatchedGroup> MakeWatchedGroup(TransportKind kind, int n) {
  auto transports = ConnectTransports(kind, n);
  if (!transports.ok()) return transports.status();
  WatchedGroup group;
  for (auto& t : *transports) {
    auto watched = std::make_unique<WatchedTransport>(std::move(t));
    group.transports.push_back(watched.get());
    auto comm = Communicator::Create(std::move(watched), AlgorithmOptions());
    if (!comm.ok()) return comm.status();
    group.comms.push_back(std::move(comm).value());
  }
  return group;
}

AbortedCall AbortWhileBlocked(Transport& t, const SendSpec& send, const RecvSpec& recv) {
  WatchedTransport watched(&t);
  AbortedCall call;
  absl::Time aborted_at;
  std::thread aborter([&] {
    call.blocked = watched.WaitUntilBlocked(absl::Now() + absl::Seconds(10));
    aborted_at = absl::Now();
    t.Abort();
  });
  call.status = watched.SendRecv(send, recv, absl::Now() + kBlockedCallDeadline);
  const absl::Time returned_at = absl::Now();
  aborter.join();
  call.latency = returned_at - aborted_at;
  return call;
}

}  // namespace collectives
}  // namespace lockstep

// Test helpers: build a group of communicators whose ranks are threads of this process, and
// run a function on every rank at once; watch a transport to tell when a call is blocked in
// it. Test-only.
#ifndef LOCKSTEP_COLLECTIVES_TEST_UTIL_H_
#define LOCKSTEP_COLLECTIVES_TEST_UTIL_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/communicator.h"
#include "collectives/communicator_factory.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {

// Runs fn(rank) on `n` threads and joins them.
void RunRanks(int n, const std::function<void(int rank)>& fn);

// Creates `n` communicators over `kind` (connected concurrently through one InMemoryStore).
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeGroup(
    TransportKind kind, int n, const AlgorithmOptions& options = {},
    const std::string& secret = "test-secret");

// A key prefix unique in this process and run (for shm segment names).
std::string UniquePrefix();

// Wall-clock bounds for the failure tests, derived from the deadlines the tests give their
// calls rather than from how fast this machine is. A call that Abort() or a peer's failure
// should end but does not returns only at its deadline: kBlockedCallDeadline for the calls
// blocked on purpose (AbortWhileBlocked, the communicator's abort tests), >= 20 s for the
// others. Over TCP a lost wake-up would instead be noticed at the end of a poll() slice (1 s by
// default), so the groups these helpers connect lengthen the slice to kTestTcpPollSlice: a
// wake-up that never comes then waits out the deadline too, and the status (DEADLINE_EXCEEDED,
// not ABORTED/UNAVAILABLE) and these bounds both catch it.
constexpr absl::Duration kBlockedCallDeadline = absl::Seconds(60);
constexpr absl::Duration kTestTcpPollSlice = absl::Hours(1);
// Abort() ends a pending call within 100 ms (transport.h, communicator.h); a test allows 50
// times that for a loaded machine's scheduling, a twelfth of kBlockedCallDeadline, and a
// quarter of the 20 s deadlines: every lost wake-up or missed failure still fails it.
constexpr absl::Duration kFailFastBound = absl::Seconds(5);
constexpr absl::Duration kAbortLatencyBound = kFailFastBound;

// Prints how long a call took to return after Abort() (the test log keeps it).
void LogAbortLatency(const std::string& what, absl::Duration latency);

// A Transport that forwards every call to another one and lets a test wait until a SendRecv
// is blocked in it: entered and not returned, its thread asleep in the kernel (poll, futex),
// as a call waiting for a peer is. Abort tests then exercise the wake-up of a waiting call,
// not the check a call makes when it starts. Owns the inner transport or borrows it.
// Thread model: as Transport; the accessors are thread-safe.
class WatchedTransport final : public Transport {
 public:
  explicit WatchedTransport(std::unique_ptr<Transport> inner);
  explicit WatchedTransport(Transport* inner);  // not owned; must outlive this

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) override;
  void Abort() override { inner_->Abort(); }
  void AbortOnPeerFailure(int failed_rank) override { inner_->AbortOnPeerFailure(failed_rank); }
  std::shared_ptr<TransportHeap> heap() const override { return inner_->heap(); }

  // SendRecv calls started so far.
  int entered();
  // True once a SendRecv is under way and its thread sleeps; false if that does not happen
  // by `deadline`.
  bool WaitUntilBlocked(absl::Time deadline);

 private:
  std::unique_ptr<Transport> owned_;
  Transport* const inner_;
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int returned_ ABSL_GUARDED_BY(mu_) = 0;
  pid_t tid_ ABSL_GUARDED_BY(mu_) = 0;  // the thread of the latest call
};

// Connects `n` transports of `kind` (kInProc, kTcp or kShm; one thread per rank, through one
// InMemoryStore), with each kind's default options.
absl::StatusOr<std::vector<std::unique_ptr<Transport>>> ConnectTransports(TransportKind kind,
                                                                          int n);

// A group of communicators over WatchedTransports (default AlgorithmOptions).
struct WatchedGroup {
  std::vector<WatchedTransport*> transports;  // transports[r]: owned by comms[r]
  std::vector<std::unique_ptr<Communicator>> comms;
};
absl::StatusOr<WatchedGroup> MakeWatchedGroup(TransportKind kind, int n);

// Calls t.SendRecv(send, recv) on this thread, where it must block (its peer never answers),
// while another thread calls t.Abort() once the call is blocked in the transport.
struct AbortedCall {
  absl::Status status;     // what SendRecv returned
  absl::Duration latency;  // from Abort() to SendRecv's return
  bool blocked = false;    // false: the call never blocked (Abort() came after 10 s anyway)
};
AbortedCall AbortWhileBlocked(Transport& t, const SendSpec& send, const RecvSpec& recv);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TEST_UTIL_H_

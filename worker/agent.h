// Agent: a worker's membership in the cluster. It registers with the coordinator (retrying
// with exponential backoff and jitter until the coordinator answers), heartbeats at the
// interval the coordinator gave, re-registers when told it was LOST or unknown, and
// deregisters when stopped. One log line per state change, with task and incarnation.
//
//                Register OK
//   REGISTERING ------------> ALIVE ----- Heartbeat OK (stays) ----+
//     ^   |  ^                  |  ^                               |
//     |   |  |  Heartbeat       |  +-------------------------------+
//     |   |  +- ABORTED/NOT_FOUND (LOST, replaced, coordinator restarted)
//     |   |                     |
//     +---+ error: wait         | Stop()
//       backoff, retry          v
//     |                     STOPPING --Deregister (best effort)--> STOPPED
//     | Stop()                                                        ^
//     +---------------------------------------------------------------+
//     | INVALID_ARGUMENT (bad task/address: retrying cannot help)
//     +--> FAILED
//
// Dynamic registration: with no task configured the coordinator assigns one; the agent
// then keeps claiming that task when it re-registers, and starts over without a task if
// another live process took it meanwhile (ALREADY_EXISTS).
//
// Ownership: borrows the client and the Clock (they must outlive it).
// Thread model: Run() blocks on the caller's thread until Stop(); Stop(), state(),
// WaitForState() and SetProgress() may be called from any thread.
#ifndef LOCKSTEP_WORKER_AGENT_H_
#define LOCKSTEP_WORKER_AGENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tf_config.h"
#include "lockstep/v1/cluster.pb.h"
#include "worker/coordinator_client.h"

namespace lockstep {
namespace worker {

struct AgentOptions {
  std::optional<TaskRef> task;  // from TF_CONFIG; nullopt: dynamic registration
  std::string address;          // this worker's host:port
  std::vector<v1::Device> devices;
  uint64_t incarnation = 0;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
};

class Agent {
 public:
  enum class State { kRegistering, kAlive, kStopping, kStopped, kFailed };
  static const char* StateName(State s);

  Agent(AgentOptions options, CoordinatorClient* client, Clock* clock);

  // Runs the state machine until Stop() (returns OK once deregistered, or when the
  // coordinator could not be told) or a permanent error (INVALID_ARGUMENT from the
  // coordinator: the task or address is wrong).
  absl::Status Run();
  void Stop();

  State state() const;
  // The task held now (nullopt before the first registration).
  std::optional<TaskRef> task() const;
  // The last RegisterWorker answer (cluster, TF_CONFIG).
  v1::RegisterWorkerResponse registration() const;
  // Waits until the state is `s` or the deadline passes; true if reached.
  bool WaitForState(State s, absl::Time deadline);
  // Progress reported with every heartbeat.
  void SetProgress(const std::string& job_id, int64_t step);

 private:
  // One registration attempt; on success moves to ALIVE.
  absl::Status TryRegister();
  // One heartbeat; ABORTED/NOT_FOUND move back to REGISTERING.
  void BeatOnce();
  void Deregister();
  void SetState(State next, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `d` or until Stop(); true if Stop() was called.
  bool WaitOrStop(absl::Duration d);
  absl::Duration NextBackoff() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Who() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentOptions options_;
  CoordinatorClient* const client_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kRegistering;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<TaskRef> task_ ABSL_GUARDED_BY(mu_);
  v1::RegisterWorkerResponse registration_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  int failed_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  bool coordinator_unreachable_ ABSL_GUARDED_BY(mu_) = false;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_AGENT_H_

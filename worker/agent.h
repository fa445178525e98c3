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
// Jobs (with an AssignmentHandler): while ALIVE a watch thread keeps a WatchAssignments
// stream open (reopened with backoff when it fails or ends) and hands every assignment to
// the handler; every heartbeat carries the handler's JobReports (ReportsDelivered after one
// that reached the coordinator). Leaving ALIVE because this process was declared LOST or
// replaced, or stopping, drops every job: the coordinator gave them up. A coordinator that
// restarted (it no longer knows the task: NOT_FOUND, and a new coordinator incarnation)
// keeps them: the agent registers again with its incarnation and the coordinator re-adopts
// the running attempts from its store, or aborts those it does not know.
//
// Dynamic registration: with no task configured the coordinator assigns one; the agent
// then keeps claiming that task when it re-registers, and starts over without a task if
// another live process took it meanwhile (ALREADY_EXISTS).
//
// Ownership: borrows the client, the Clock and the handler (they must outlive it).
// Thread model: Run() blocks on the caller's thread until Stop(); Stop(), state(),
// and WaitForState() may be called from any thread.
#ifndef LOCKSTEP_WORKER_AGENT_H_
#define LOCKSTEP_WORKER_AGENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tf_config.h"
#include "lockstep/v1/cluster.pb.h"
#include "worker/assignment_handler.h"
#include "worker/worker_service_client.h"

namespace lockstep {
namespace worker {

struct AgentOptions {
  std::optional<TaskRef> task;  // from TF_CONFIG; nullopt: dynamic registration
  std::string address;          // this worker's host:port
  std::vector<v1::Device> devices;
  uint64_t incarnation = 0;
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  // Receives partitions and aborts, reports on jobs; null: this worker runs no jobs.
  AssignmentHandler* jobs = nullptr;
  // Called on entering ALIVE (true) and on leaving it (false): lockstepd's health status.
  // Runs with the agent's lock held: it must not call the agent.
  std::function<void(bool alive)> on_alive;
  // Called when an operator drains this task (true: `lockstep drain`) or undoes it (false),
  // as heartbeats tell: lockstepd's health is NOT_SERVING while drained. Runs with the
  // agent's lock held.
  std::function<void(bool drained)> on_drained;
};

class Agent {
 public:
  enum class State { kRegistering, kAlive, kStopping, kStopped, kFailed };
  static const char* StateName(State s);

  Agent(AgentOptions options, WorkerServiceClient* client, Clock* clock);
  ~Agent();

  // Runs the state machine until Stop() (returns OK once deregistered, or when the
  // coordinator could not be told) or a permanent error (INVALID_ARGUMENT from the
  // coordinator: the task or address is wrong).
  absl::Status Run();
  void Stop();
  // The process is shutting down but still finishing its jobs (a preemption): heartbeats
  // say so from now on, and the coordinator schedules nothing new on this worker.
  void SetLeaving();

  State state() const;
  // The task held now (nullopt before the first registration).
  std::optional<TaskRef> task() const;
  // The last RegisterWorker answer (its task, the cluster).
  v1::RegisterWorkerResponse registration() const;
  // Waits until the state is `s` or the deadline passes; true if reached.
  bool WaitForState(State s, absl::Time deadline);

 private:
  // One registration attempt; on success moves to ALIVE.
  absl::Status TryRegister();
  // One heartbeat; ABORTED/NOT_FOUND move back to REGISTERING.
  void BeatOnce();
  void Deregister();
  // The assignment watch thread: started on entering ALIVE, stopped (stream cancelled,
  // thread joined, jobs dropped) on leaving it. Run()'s thread only.
  void StartWatch();
  // Stops the watch thread; drops every job unless `drop_jobs` is false.
  void StopWatch(const std::string& why, bool drop_jobs = true);
  void WatchLoop();
  // Drops every job when the coordinator's incarnation changed; records it.
  void CheckCoordinatorIncarnation(uint64_t incarnation);
  void SetState(State next, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for `d` or until Stop(); true if Stop() was called.
  bool WaitOrStop(absl::Duration d);
  absl::Duration NextBackoff() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Who() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentOptions options_;
  WorkerServiceClient* const client_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kRegistering;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<TaskRef> task_ ABSL_GUARDED_BY(mu_);
  v1::RegisterWorkerResponse registration_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  int failed_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  bool coordinator_unreachable_ ABSL_GUARDED_BY(mu_) = false;
  bool drained_ ABSL_GUARDED_BY(mu_) = false;  // as the last heartbeat answered
  // Registering again because the coordinator forgot this task (it restarted): its jobs go
  // on (the coordinator re-adopts them).
  bool keep_jobs_ ABSL_GUARDED_BY(mu_) = false;
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;  // SetLeaving()
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
  uint64_t coordinator_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watch_thread_;  // Run()'s thread only
  bool watch_stop_ ABSL_GUARDED_BY(mu_) = false;
  AssignmentStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;  // open now, owned by WatchLoop
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_AGENT_H_

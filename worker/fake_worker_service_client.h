// FakeWorkerServiceClient: a WorkerServiceClient for tests, with no network. Each RPC counts
// its calls and answers through a replaceable handler; the defaults accept everything
// and keep keys in memory. Heartbeat, Deregister and Barrier also keep every request (task,
// incarnation, barrier id and members), so that tests check what they were asked. GetKey on a
// missing key waits for it in real time (no clock), or advances the FakeClock (if given) by the
// requested timeout and answers DEADLINE_EXCEEDED, as a real wait would. Thread model: thread-safe;
// handlers run without the fake's lock held.
#ifndef LOCKSTEP_WORKER_FAKE_WORKER_SERVICE_CLIENT_H_
#define LOCKSTEP_WORKER_FAKE_WORKER_SERVICE_CLIENT_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "worker/worker_service_client.h"

namespace lockstep {
namespace worker {

class FakeWorkerServiceClient final : public WorkerServiceClient {
 public:
  explicit FakeWorkerServiceClient(FakeClock* clock = nullptr) : clock_(clock) {}

  // Handlers; set before the client is used concurrently.
  std::function<absl::StatusOr<v1::RegisterWorkerResponse>(const v1::RegisterWorkerRequest&)>
      on_register;
  std::function<absl::Status(const v1::HeartbeatRequest&)> on_heartbeat;
  std::function<absl::Status(const v1::DeregisterRequest&)> on_deregister;
  std::function<absl::Status(const v1::BarrierRequest&)> on_barrier;
  // Called at the start of every GetKey (e.g. to abort a store mid-wait).
  std::function<void(const std::string& key)> on_get_key;

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request) override;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request) override;
  absl::Status Deregister(const v1::DeregisterRequest& request) override;
  absl::Status SetKey(const std::string& key, const std::string& value, bool overwrite) override;
  absl::StatusOr<std::string> GetKey(const std::string& key, absl::Duration timeout) override;
  absl::Status Barrier(const v1::BarrierRequest& request) override;
  // Streams read the assignments given to PushAssignment(), in order, one reader each.
  absl::StatusOr<std::unique_ptr<AssignmentStream>> WatchAssignments(
      const v1::WatchAssignmentsRequest& request) override;
  std::string address() const override { return "fake:1"; }

  // Queues an assignment for the open (or next) stream.
  void PushAssignment(v1::Assignment assignment);
  // Ends every stream open now with `status` (the coordinator went away).
  void BreakStreams(absl::Status status);
  // The coordinator incarnation Heartbeat answers with.
  void set_coordinator_incarnation(uint64_t incarnation);
  // Every HeartbeatRequest, DeregisterRequest and BarrierRequest received, in order.
  std::vector<v1::HeartbeatRequest> heartbeats() const;
  std::vector<v1::DeregisterRequest> deregisters() const;
  std::vector<v1::BarrierRequest> barriers() const;

  int calls(const std::string& rpc) const;
  std::map<std::string, std::string> keys() const;

 private:
  class Stream;
  void Count(const std::string& rpc);

  FakeClock* const clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Assignment> assignments_ ABSL_GUARDED_BY(mu_);
  int64_t stream_generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by BreakStreams
  absl::Status break_status_ ABSL_GUARDED_BY(mu_);
  uint64_t coordinator_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::HeartbeatRequest> heartbeats_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::DeregisterRequest> deregisters_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::BarrierRequest> barriers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_FAKE_WORKER_SERVICE_CLIENT_H_

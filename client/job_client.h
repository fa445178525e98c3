// JobClient: the job RPCs of the coordinator (SubmitJob, GetJob, ListJobs, CancelJob,
// WatchJob) for the CLI and the tests. gRPC stays inside; every error is an absl::Status
// converted in common/grpc_status, with the coordinator's address in it.
//
// Ownership: owns its channel and stub. Thread model: thread-safe (gRPC stubs are); Watch
// blocks its caller until the job ends.
#ifndef LOCKSTEP_CLIENT_JOB_CLIENT_H_
#define LOCKSTEP_CLIENT_JOB_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls_options.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace client {

class JobClient {
 public:
  // INVALID_ARGUMENT when `address` is not host:port. Connects lazily, with `tls`
  // (common/grpc_channel.h: the cluster CA and a bearer token, or --insecure).
  static absl::StatusOr<std::unique_ptr<JobClient>> Create(const std::string& address,
                                                           const TlsOptions& tls,
                                                           absl::Duration rpc_timeout);

  // The new job's id; INVALID_ARGUMENT naming the field when the coordinator refuses it.
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::GetJobResponse> Get(const std::string& id);
  absl::StatusOr<std::vector<v1::JobRecord>> List(int limit = 0);
  absl::StatusOr<v1::JobRecord> Cancel(const std::string& id, const std::string& reason = "");
  // DrainWorker: `task` is "worker/1" (type/index). INVALID_ARGUMENT naming a malformed task.
  absl::StatusOr<v1::DrainWorkerResponse> Drain(const std::string& task, bool undo);
  // Streams the job's events into `on_event` until the job ends; returns the last event
  // (its job state is terminal). A broken stream is reopened (the first event of a new
  // stream is the current state: a restarting coordinator is waited for) until `deadline`,
  // until the coordinator has been unreachable for `give_up_after` (UNAVAILABLE), or until
  // `stop` (checked between attempts) returns true (CANCELLED).
  absl::StatusOr<v1::JobEvent> Watch(const std::string& id,
                                     const std::function<void(const v1::JobEvent&)>& on_event,
                                     absl::Time deadline = absl::InfiniteFuture(),
                                     const std::function<bool()>& stop = nullptr,
                                     absl::Duration give_up_after = absl::Seconds(30));

  const std::string& address() const { return address_; }

 private:
  JobClient(std::string address, absl::Duration rpc_timeout,
            std::unique_ptr<v1::Coordinator::Stub> stub)
      : address_(std::move(address)), rpc_timeout_(rpc_timeout), stub_(std::move(stub)) {}

  const std::string address_;
  const absl::Duration rpc_timeout_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_CLIENT_H_

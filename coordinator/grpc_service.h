// CoordinatorService: the gRPC adapter over the coordinator's domain objects. Each unary
// handler validates the request, calls Membership / KvStore / Barriers / JobService, converts the
// absl::Status (common/grpc_status.h) and finishes. Handlers that may wait (GetKey and
// Barrier with a timeout) run the wait on a thread of their own so that gRPC's callback
// threads never block; so do the WatchAssignments and WatchJob streams
// (grpc_stream_writer.h). Shutdown() wakes those waits and joins them.
//
// Ownership: borrows the domain objects and the Clock; they must outlive it.
// Thread model: gRPC calls the handlers concurrently; the domain objects are thread-safe.
#ifndef LOCKSTEP_COORDINATOR_GRPC_SERVICE_H_
#define LOCKSTEP_COORDINATOR_GRPC_SERVICE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/barriers.h"
#include "coordinator/job_service.h"
#include "coordinator/kv_store.h"
#include "coordinator/membership.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace coordinator {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  CoordinatorService(Membership* membership, KvStore* kv, Barriers* barriers, JobService* jobs,
                     Clock* clock, uint64_t incarnation);
  ~CoordinatorService() override;

  // Wakes pending GetKey/Barrier waits (they answer UNAVAILABLE) and waits for their
  // threads to finish. Call before the server is destroyed.
  void Shutdown();

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* ctx,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Deregister(grpc::CallbackServerContext* ctx,
                                       const v1::DeregisterRequest* request,
                                       v1::DeregisterResponse* response) override;
  grpc::ServerUnaryReactor* SetKey(grpc::CallbackServerContext* ctx,
                                   const v1::SetKeyRequest* request,
                                   v1::SetKeyResponse* response) override;
  grpc::ServerUnaryReactor* GetKey(grpc::CallbackServerContext* ctx,
                                   const v1::GetKeyRequest* request,
                                   v1::GetKeyResponse* response) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* ctx,
                                    const v1::BarrierRequest* request,
                                    v1::BarrierResponse* response) override;
  grpc::ServerUnaryReactor* GetClusterStatus(grpc::CallbackServerContext* ctx,
                                             const v1::GetClusterStatusRequest* request,
                                             v1::GetClusterStatusResponse* response) override;
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitJobRequest* request,
                                      v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const v1::GetJobRequest* request,
                                   v1::GetJobResponse* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* request,
                                      v1::CancelJobResponse* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* ctx,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerWriteReactor<v1::Assignment>* WatchAssignments(
      grpc::CallbackServerContext* ctx, const v1::WatchAssignmentsRequest* request) override;

 private:
  // Runs `wait` on its own thread, then finishes `reactor` with its status.
  void FinishLater(grpc::ServerUnaryReactor* reactor, std::function<absl::Status()> wait);
  absl::Time DeadlineFor(int64_t timeout_ms) const;
  // Counts a stream thread in (for Shutdown) and returns the function that counts it out.
  std::function<void()> EnterStream();

  Membership* const membership_;
  KvStore* const kv_;
  Barriers* const barriers_;
  JobService* const jobs_;
  Clock* const clock_;
  const uint64_t incarnation_;
  const absl::Time start_;

  absl::Mutex mu_;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_SERVICE_H_

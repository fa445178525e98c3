// CoordinatorServer: a running coordinator. Builds the domain objects (Membership, KvStore,
// Barriers, JobStore, JobService), serves them over gRPC on host:port (port 0 = any free port, read
// back with port()), and runs a sweeper thread that marks silent workers LOST and logs it, and
// ticks the job service (scheduling, failures of lost workers). Jobs that were RUNNING when a
// previous coordinator stopped are marked FAILED at start (JobService::Recover).
// Serves the worker-facing lockstep.v1.WorkerService (grpc_worker_service.h) and the
// client-facing lockstep.v1.JobService (grpc_job_service.h) on the one port, over TLS
// (mutual for daemons) unless options.tls.insecure; both authorize every call through one
// GrpcAuthorizer (its tokens, coordinator/authz.h's table per service).
// Used by main.cc, by the in-process tests and by the benchmarks.
//
// Ownership: owns the server, the service, the domain objects and the sweeper thread;
// borrows the Clock. Thread model: Create/Shutdown from one thread; accessors are
// thread-safe. Shutdown() (also run by the destructor) stops accepting calls, wakes every
// waiting GetKey/Barrier and joins every thread.
// Health: the port also serves grpc.health.v1.Health (common/health_server.h), SERVING from
// the start (the job store is loaded before the port opens), NOT_SERVING once Shutdown()
// begins.
#ifndef LOCKSTEP_COORDINATOR_GRPC_SERVER_H_
#define LOCKSTEP_COORDINATOR_GRPC_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/tls_options.h"
#include "coordinator/barriers.h"
#include "coordinator/checkpoint_fetch.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/diagnostics_service.h"
#include "coordinator/job_service.h"
#include "coordinator/job_store/job_store.h"
#include "coordinator/kv_store.h"
#include "coordinator/membership.h"
#include "coordinator/revoked_certificates.h"
#include "coordinator/token_table.h"

namespace grpc {
class Server;
}

namespace lockstep {
namespace coordinator {

class GrpcAuthorizer;
class GrpcJobService;
class GrpcWorkerService;

struct CoordinatorServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0: any free port
  MembershipOptions membership;
  JobServiceOptions jobs;
  // Where the job store lives (created if missing; its parent must exist). Empty: a new
  // temporary directory (tests).
  std::string state_dir;
  // TLS on the port: the coordinator's certificate and key and the cluster CA, which
  // verifies the certificates of daemons (mutual TLS) and of clients that present one.
  // `tls.insecure`: plaintext, and every caller may call every RPC.
  TlsOptions tls;
  // The clients' bearer tokens (--tokens_file); unused when insecure.
  TokenTable tokens;
  // Certificate names refused although the CA signed them (--revoked_certificates_file).
  RevokedCertificates revoked;
  // Limits on what callers control: the size of one request (--max_message_bytes; gRPC
  // answers RESOURCE_EXHAUSTED beyond), the key-value store's and the barriers' per job.
  // The jobs' own (queued jobs, model, batch, watches, retention) are in `jobs`.
  int max_message_bytes = 4 << 20;
  // The server's threads (a grpc::ResourceQuota): every call runs on one, and a waiting
  // GetKey, Barrier or stream holds it, so the per-job, per-caller and per-identity limits
  // (kv.waits, barriers.waits, jobs.watches) keep any one caller far below this; past it gRPC
  // answers new calls RESOURCE_EXHAUSTED instead of starting threads without end.
  int max_server_threads = 2048;  // --max_server_threads
  KvLimits kv;
  BarrierLimits barriers;
  Clock* clock = Clock::Real();
  // Prometheus metrics: RPC latencies (an interceptor) and, at every scrape, tasks and jobs.
  // Optional; must outlive the server.
  CoordinatorMetrics* metrics = nullptr;
};

class CoordinatorServer {
 public:
  // Errors: UNAVAILABLE when the port cannot be bound; CheckTlsOptions' (the TLS files);
  // the JobStore's (state_dir).
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Create(
      CoordinatorServerOptions options);
  ~CoordinatorServer();

  int port() const { return port_; }
  // "127.0.0.1:port" style address clients on this machine can dial.
  std::string local_address() const;
  uint64_t incarnation() const { return incarnation_; }
  Membership* membership() { return &membership_; }
  JobService* jobs() { return jobs_.get(); }
  const std::string& state_dir() const { return state_dir_; }

  // Replaces the clients' tokens (SIGHUP reloads --tokens_file): a removed token is refused
  // from the next call on.
  void SetTokens(TokenTable tokens);
  // Replaces the revoked certificate names (SIGHUP reloads --revoked_certificates_file): a
  // newly revoked name is refused from the next call on and its open streams end.
  void SetRevoked(RevokedCertificates revoked);

  void Shutdown();
  // Blocks until Shutdown() is called from another thread.
  void Wait();

 private:
  explicit CoordinatorServer(CoordinatorServerOptions options);
  void SweepLoop();

  const CoordinatorServerOptions options_;
  const uint64_t incarnation_;
  Membership membership_;
  KvStore kv_;
  Barriers barriers_;
  std::string state_dir_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<DiagnosticsService> diagnostics_;  // the flight records, logs and verdicts
  std::unique_ptr<JobServiceFetchCluster> fetch_cluster_;
  std::unique_ptr<CheckpointFetch> fetch_;  // FetchCheckpoint and UploadCheckpoint
  std::unique_ptr<GrpcAuthorizer> authorizer_;
  std::unique_ptr<GrpcWorkerService> worker_service_;
  std::unique_ptr<GrpcJobService> job_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread sweeper_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GRPC_SERVER_H_

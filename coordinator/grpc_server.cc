#include "coordinator/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/health_server.h"
#include "common/incarnation.h"
#include "common/net.h"
#include "common/status.h"
#include "common/tls_credentials.h"
#include "coordinator/grpc_authorizer.h"
#include "coordinator/grpc_job_service.h"
#include "coordinator/grpc_worker_service.h"
#include "coordinator/rpc_metrics_interceptor.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace coordinator {

CoordinatorServer::CoordinatorServer(CoordinatorServerOptions options)
    : options_(std::move(options)),
      incarnation_(NewIncarnation()),
      membership_(options_.membership, options_.clock),
      kv_(options_.clock, options_.kv),
      barriers_(options_.clock, options_.barriers) {}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(
    CoordinatorServerOptions options) {
  // The TLS files checked (common/tls_credentials.h) before anything else is done.
  LS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      ServerCredentials(options.tls));
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(std::move(options)));
  s->state_dir_ = s->options_.state_dir;
  if (s->state_dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/lockstep-coordinator-XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot create a state directory ", templ, ": ", std::strerror(errno)));
    }
    s->state_dir_ = templ;
  }
  LS_ASSIGN_OR_RETURN(s->store_, JobStore::Open({s->state_dir_, s->options_.clock}));
  JobServiceOptions job_options = s->options_.jobs;
  CoordinatorServer* server = s.get();
  job_options.on_attempt_ended = [server](const std::string& prefix) {
    const int keys = server->kv_.DeletePrefix(prefix);
    const int barriers = server->barriers_.DeletePrefix(prefix);
    spdlog::debug("attempt {} ended: {} keys and {} barriers deleted", prefix, keys, barriers);
  };
  s->jobs_ = std::make_unique<JobService>(s->store_.get(), &s->membership_, s->options_.clock,
                                          std::move(job_options));
  LS_RETURN_IF_ERROR(s->jobs_->Recover());
  s->diagnostics_ = std::make_unique<DiagnosticsService>(
      s->jobs_.get(), s->options_.clock,
      DiagnosticsOptions{.heartbeat_interval = s->options_.membership.heartbeat_interval});
  s->authorizer_ = std::make_unique<GrpcAuthorizer>(s->options_.tls.insecure, s->options_.tokens,
                                                    s->options_.revoked);
  s->fetch_cluster_ = std::make_unique<JobServiceFetchCluster>(s->jobs_.get(), &s->membership_);
  s->fetch_ = std::make_unique<CheckpointFetch>(s->fetch_cluster_.get(), s->options_.clock);
  s->worker_service_ = std::make_unique<GrpcWorkerService>(
      &s->membership_, &s->kv_, &s->barriers_, s->jobs_.get(), s->diagnostics_.get(),
      s->options_.clock, s->incarnation_, s->authorizer_.get(), s->fetch_.get());
  s->job_service_ = std::make_unique<GrpcJobService>(
      &s->membership_, s->jobs_.get(), s->diagnostics_.get(), s->options_.clock, s->incarnation_,
      s->authorizer_.get(), s->fetch_.get());
  grpc::ServerBuilder builder;
  // HostPort brackets an IPv6 host ("[::]:7000"), as gRPC wants.
  std::string address = HostPort{s->options_.host, s->options_.port}.ToString();
  builder.AddListeningPort(address, credentials, &s->port_);
  builder.RegisterService(s->worker_service_.get());
  builder.RegisterService(s->job_service_.get());
  builder.SetMaxReceiveMessageSize(s->options_.max_message_bytes);
  grpc::ResourceQuota quota("lockstep-coordinator");
  quota.SetMaxThreads(s->options_.max_server_threads);
  builder.SetResourceQuota(quota);
  EnableHealthService();  // grpc.health.v1.Health on this port too
  if (s->options_.metrics != nullptr) {
    s->options_.metrics->Track(&s->membership_, s->jobs_.get(), s->diagnostics_.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> timing;
    timing.push_back(RpcMetricsInterceptor(s->options_.metrics));
    builder.experimental().SetInterceptorCreators(std::move(timing));
  }
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("coordinator cannot listen on ", address,
                     "; is the port in use by another process? (use --port=0 for any free port)"));
  }
  s->sweeper_ = std::thread([p = s.get()] { p->SweepLoop(); });
  return s;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

void CoordinatorServer::SetTokens(TokenTable tokens) { authorizer_->SetTokens(std::move(tokens)); }

void CoordinatorServer::SetRevoked(RevokedCertificates revoked) {
  authorizer_->SetRevoked(std::move(revoked));
}

std::string CoordinatorServer::local_address() const { return absl::StrCat("127.0.0.1:", port_); }

void CoordinatorServer::SweepLoop() {
  absl::MutexLock l(&mu_);
  while (!stopping_) {
    // The sweeper paces itself on real time: membership answers are exact without it.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
    if (stopping_) break;
    mu_.Unlock();
    for (const v1::TaskStatus& t : membership_.Sweep()) {
      spdlog::warn(
          "{}/{} (incarnation {}, address {}) LOST: no heartbeat for {:.1f} s; check that "
          "its lockstepd is running and can reach the coordinator",
          t.task().type(), t.task().index(), ShortIncarnation(t.incarnation()), t.address(),
          t.seconds_since_heartbeat());
    }
    jobs_->Tick();
    mu_.Lock();
  }
}

void CoordinatorServer::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
  if (options_.metrics != nullptr) options_.metrics->Track(nullptr, nullptr);
  if (server_ != nullptr && server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->Shutdown();  // NOT_SERVING: draining
  }
  // Wake waiting GetKey/Barrier calls and open streams first, so Shutdown below is quick.
  kv_.Shutdown();
  barriers_.Shutdown();
  if (jobs_ != nullptr) jobs_->Shutdown();
  if (diagnostics_ != nullptr) diagnostics_->Shutdown();
  if (fetch_ != nullptr) fetch_->Shutdown();
  if (server_ == nullptr) return;  // Create failed before the server started
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  server_->Wait();
}

void CoordinatorServer::Wait() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(&stopping_));
}

}  // namespace coordinator
}  // namespace lockstep

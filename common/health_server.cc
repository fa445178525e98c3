#include "common/health_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status.h"

namespace lockstep {

void EnableHealthService() { grpc::EnableDefaultHealthCheckService(true); }

void SetServing(grpc::Server* server, bool serving) {
  if (server == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(serving);
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Create(const std::string& address) {
  LS_ASSIGN_OR_RETURN(const HostPort listen, ParseListenAddress(address, "--health_address"));
  EnableHealthService();
  std::unique_ptr<HealthServer> s(new HealthServer());
  const std::string bind = listen.ToString();
  grpc::ServerBuilder builder;
  // A second daemon given the same address must fail, not share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(bind, grpc::InsecureServerCredentials(), &s->port_);
  // Answers UNIMPLEMENTED to every other method. gRPC also needs a service of its own on a
  // server before it builds it (the health service joins at start).
  s->unimplemented_ = std::make_unique<grpc::CallbackGenericService>();
  builder.RegisterCallbackGenericService(s->unimplemented_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--health_address ", bind, ": cannot listen; is the port in use?"));
  }
  // gRPC's service starts out SERVING; a daemon is not ready until it says so.
  lockstep::SetServing(s->server_.get(), false);
  return s;
}

HealthServer::~HealthServer() { Shutdown(); }

void HealthServer::SetServing(bool serving) {
  absl::MutexLock l(&mu_);
  if (!shut_down_ && !draining_) lockstep::SetServing(server_.get(), serving);
}

void HealthServer::Drain() {
  absl::MutexLock l(&mu_);
  if (shut_down_) return;
  draining_ = true;
  lockstep::SetServing(server_.get(), false);
}

void HealthServer::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    if (shut_down_ || server_ == nullptr) return;  // server_: null when Create failed
    shut_down_ = true;
  }
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) health->Shutdown();  // NOT_SERVING to every watcher
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  server_->Wait();
}

}  // namespace lockstep

#include "coordinator/rpc_metrics_interceptor.h"

#include <string>

#include "absl/time/clock.h"

namespace lockstep {
namespace coordinator {
namespace {

using grpc::experimental::InterceptionHookPoints;

class Interceptor final : public grpc::experimental::Interceptor {
 public:
  Interceptor(grpc::experimental::ServerRpcInfo* info, CoordinatorMetrics* metrics)
      : metrics_(metrics),
        method_(info->method() != nullptr ? info->method() : "unknown"),
        unary_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY),
        started_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->RpcDone(method_, unary_, methods->GetSendStatus().error_code(),
                        absl::Now() - started_);
    }
    methods->Proceed();
  }

 private:
  CoordinatorMetrics* const metrics_;
  const std::string method_;
  const bool unary_;
  const absl::Time started_;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new Interceptor(info, metrics_);  // gRPC owns it
  }

 private:
  CoordinatorMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    CoordinatorMetrics* metrics) {
  return std::make_unique<Factory>(metrics);
}

}  // namespace coordinator
}  // namespace lockstep

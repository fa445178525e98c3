// RpcMetricsInterceptor: a gRPC server interceptor that times every RPC from its arrival to
// the status the server sends, and hands method, kind, status code and latency to
// CoordinatorMetrics::RpcDone. Installed by CoordinatorServer when it has metrics, so the
// service's methods stay free of timing code.
//
// Ownership: the factory borrows the metrics (they must outlive the server). Thread model:
// gRPC creates one interceptor per call and calls it from the call's threads, one at a time.
#ifndef LOCKSTEP_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_
#define LOCKSTEP_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "coordinator/coordinator_metrics.h"

namespace lockstep {
namespace coordinator {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptor(
    CoordinatorMetrics* metrics);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_

#include "common/grpc_unary_call.h"

namespace lockstep {

void WaitForOne(grpc::CompletionQueue* cq) {
  void* tag;
  bool ok;
  const absl::Time spin_end = absl::Now() + kSpinBeforeBlocking;
  bool done = false;
  while (!done && absl::Now() < spin_end) {
    done = cq->AsyncNext(&tag, &ok, gpr_inf_past(GPR_CLOCK_MONOTONIC)) ==
           grpc::CompletionQueue::GOT_EVENT;
  }
  if (!done) cq->Next(&tag, &ok);
  cq->Shutdown();
  while (cq->Next(&tag, &ok)) {
  }
}

}  // namespace lockstep

#include "collectives/collective_communicator.h"

namespace lockstep {
namespace collectives {

std::shared_ptr<CollectiveHandle> CollectiveHandle::Finished(absl::Status status) {
  auto handle = std::make_shared<CollectiveHandle>();
  handle->Finish(std::move(status));
  return handle;
}

absl::Status CollectiveHandle::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return status_;
}

bool CollectiveHandle::WaitUntil(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithDeadline(absl::Condition(&done_), deadline);
}

bool CollectiveHandle::Done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

void CollectiveHandle::Finish(absl::Status status) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
  done_ = true;
}

}  // namespace collectives
}  // namespace lockstep

#include "distribute/replica_threads.h"

namespace lockstep::distribute {

ReplicaThreads::ReplicaThreads(int num_replicas) {
  for (int r = 0; r < num_replicas; ++r) threads_.emplace_back([this, r] { Loop(r); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ReplicaThreads::Run(const std::function<void(int)>& fn) {
  absl::MutexLock lock(&mu_);
  job_ = &fn;
  remaining_ = static_cast<int>(threads_.size());
  ++generation_;
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return remaining_ == 0; };
  mu_.Await(absl::Condition(&done));
  job_ = nullptr;
}

void ReplicaThreads::Loop(int replica) {
  int64_t seen = 0;
  while (true) {
    const std::function<void(int)>* job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || generation_ > seen;
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(replica);
    absl::MutexLock lock(&mu_);
    --remaining_;
  }
}

}  // namespace lockstep::distribute

// ReplicaThreads: one long-lived thread per local replica (the executor's model: a replica
// is a thread that keeps its device, BLAS and, later, CUDA context for the whole job).
// Run(fn) calls fn(r) on thread r for every replica and returns when all have returned.
//
// Ownership: owns its threads; the destructor stops and joins them.
// Thread model: Run from one thread at a time (not from inside fn).
#ifndef LOCKSTEP_DISTRIBUTE_REPLICA_THREADS_H_
#define LOCKSTEP_DISTRIBUTE_REPLICA_THREADS_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::distribute {

class ReplicaThreads {
 public:
  explicit ReplicaThreads(int num_replicas);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  void Run(const std::function<void(int replica)>& fn);

 private:
  void Loop(int replica);

  absl::Mutex mu_;
  const std::function<void(int)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_REPLICA_THREADS_H_

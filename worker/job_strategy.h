// MakeJobStrategy: the tf.distribute strategy a Partition's plan (Partition.plan, lowered by
// the coordinator: jobspec/lower.h) names, on this worker's devices. The plan decided
// everything; nothing of the spec is checked again here:
//   MULTI_WORKER_MIRRORED: the group of Partition.cluster and .task (worker/partition_group.h),
//     joined through `store`
//     (scoped by the partition's rendezvous prefix) with the attempt's secret and the plan's
//     communication (backend, packs, timeout, hierarchical or flat, encryption, compression).
//   MIRRORED, CENTRAL_STORAGE: every local device of the plan's kind; ONE_DEVICE: the first
//   one (/gpu:0 for GPU replicas, else /cpu:0).
// The plan's device kind bounds every strategy: a CPU job on a GPU host stays on /cpu:N.
// What is still checked is what only this worker knows, and the message says it is a fact
// of this worker: the GPUs the plan puts replicas on (FAILED_PRECONDITION), NCCL in this
// build (distribute/devices.h: CheckBackend). Errors otherwise: INVALID_ARGUMENT for a
// partition the coordinator cannot have sent (no cluster or task, no store); the strategies' own
// (rendezvous DEADLINE_EXCEEDED naming the missing peer, ABORTED after store->Abort()).
// Stateless; blocks (multi-worker) until every worker joined or the deadline passes.
#ifndef LOCKSTEP_WORKER_JOB_STRATEGY_H_
#define LOCKSTEP_WORKER_JOB_STRATEGY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/collective_observer.h"
#include "collectives/store.h"
#include "collectives/types.h"
#include "distribute/nccl_all_reduce.h"
#include "distribute/strategy.h"
#include "lockstep/v1/assignment.pb.h"

namespace lockstep {
namespace worker {

struct JobStrategyOptions {
  distribute::LocalDevices devices;     // this worker's (--cpu_devices, --gpus)
  distribute::NcclEnvironment nccl;     // GPU replicas over NCCL (Mirrored, MultiWorkerMirrored)
  collectives::Store* store = nullptr;  // multi-worker rendezvous; not owned
  collectives::TransportKind transport = collectives::TransportKind::kTcp;
  std::string listen_host = "127.0.0.1";
  int data_port = 0;  // `lockstepd --data_port`: TCP's listen port, 0 an ephemeral one
  absl::Duration connect_timeout = absl::Seconds(60);
  // MultiWorkerMirrored over shared memory: the zero-copy heap each rank reserves for its
  // gradients (CommunicationOptions::shm_heap_bytes); ShmHeapBytes sizes it.
  size_t shm_heap_bytes = 0;
  // MultiWorkerMirrored: told what the collectives run and move (metrics); optional.
  collectives::CollectiveObserver* observer = nullptr;
  // MultiWorkerMirrored: told of the cross-worker group's collectives instead of `observer`
  // (a CollectiveObserverList of a flight recorder and the metrics); optional.
  collectives::CollectiveObserver* cross_worker_observer = nullptr;
};

// Heap room for one replica's gradients: each trainable variable's bytes rounded up to the
// heap's 64-byte blocks, a quarter more (a gradient the executor must copy takes a second
// buffer of its shape), and 1 MiB.
size_t ShmHeapBytes(const std::vector<size_t>& gradient_bytes);

// The plan's communication as the strategies take it: the backend given (not resolved
// again), its packs, timeout, encryption and compression.
distribute::CommunicationOptions JobCommunicationOptions(const v1::CommunicationPlan& plan);

// The devices a job's replicas may use on a worker that has `worker`: its GPUs for GPU
// replicas (FAILED_PRECONDITION, a fact of this worker, when it has none), else its CPU
// devices only.
absl::StatusOr<distribute::LocalDevices> JobDevices(const v1::DevicePlan& plan,
                                                    const distribute::LocalDevices& worker);

absl::StatusOr<std::unique_ptr<distribute::Strategy>> MakeJobStrategy(
    const v1::Partition& partition, const JobStrategyOptions& options);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_STRATEGY_H_

// FakeNcclWorld: the NCCL groups of one test, whose ranks (threads of this process, each
// with its own FakeNcclApi, as each would be a process) really exchange data. A rank joins
// the group of a unique id (ncclCommInitRank); the k-th collective each rank issues on its
// communicator is the group's collective #k, as in NCCL. When the last rank issues it, the
// ranks' calls are compared (kind, count, dtype, op, root: a disagreement fails the whole
// group, where NCCL would hang or corrupt) and the result is written into every rank's recv
// buffer, in rank order:
//   all-reduce      every rank's send reduced as collectives/reduce.h does (rank 0's, then
//                   rank 1's combined in, ...; f16/bf16 rounded after each step); avg is the
//                   sum divided by nranks (integer division for integers, as NCCL's
//                   SumPostDiv; NCCL pre-multiplies floats by 1/nranks instead, which may
//                   differ in the last bit when nranks is not a power of two).
//                   bf16 (ncclBfloat16, what BF16 gradient compression sends) sums as
//                   acc = rank 0's value; for r = 1 .. nranks-1: acc = bf16(f32(acc) +
//                   f32(rank r's)), each step rounded to nearest even (common/bfloat16.h).
//                   Real NCCL also adds two bf16 values in f32 and rounds once per step, but
//                   in its ring's or tree's order (each chunk starts at another rank), so
//                   with more than two ranks it agrees with this reference only within
//                   bf16's rounding (about nranks * 2^-8 of the sum of magnitudes)
//   broadcast       the root's send
//   all-gather      rank r's `count` elements at recv[r * count]
//   reduce-scatter  block r (count elements) of every rank's send, reduced, in rank r's recv
// Buffers are host memory (this fake's "device" memory), or, after UseDeviceMemory, device
// memory of a FakeCudaApi, read and written through its private view (HostView) as the
// emulated kernels do; a pointer the FakeCudaApi does not know is taken as host memory. NCCL's
// argument checks are made when a call is issued (Check): a root outside [0, nranks), a null buffer
// with elements, a handle that is not a live communicator.
//
// Failure: Abort(comm) (ncclCommAbort) frees that rank's communicator and fails every other
// rank's pending and later collectives with UNAVAILABLE naming the aborted rank, as the
// remote errors NCCL reports when a peer tears its connections down; Destroy(comm) frees it
// and tells nobody (a collective that needs that rank then waits for its deadline).
//
// Handles stay allocated until the world goes, so that a freed one is refused, not reused.
// Thread model: thread-safe; one mutex guards every group.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_WORLD_H_
#define LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_WORLD_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "collectives/nccl/nccl_api.h"
#include "collectives/types.h"
#include "common/cuda/fake_cuda_api.h"

namespace lockstep::collectives::nccl {

// One rank's call of one collective, as NCCL was asked for it.
struct FakeNcclCall {
  enum class Kind : uint8_t { kAllReduce, kBroadcast, kAllGather, kReduceScatter };
  Kind kind = Kind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements: of every buffer for all-reduce and broadcast, of the send buffer for all-gather
  // and of the recv buffer for reduce-scatter (NCCL's sendcount / recvcount).
  size_t count = 0;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;  // all-reduce and reduce-scatter only
  int root = -1;                 // broadcast only

  bool reduces() const { return kind == Kind::kAllReduce || kind == Kind::kReduceScatter; }
  // What was asked, without the buffers: "all-reduce f32 sum count 3", "broadcast bf16 root 3
  // count 2", "all-gather f32 count 3".
  std::string Describe() const;
};

// A communicator's place in its group.
struct FakeNcclRank {
  int rank = 0;
  int nranks = 1;
};

class FakeNcclWorld {
 public:
  FakeNcclWorld();
  ~FakeNcclWorld();
  FakeNcclWorld(const FakeNcclWorld&) = delete;
  FakeNcclWorld& operator=(const FakeNcclWorld&) = delete;

  // Buffers that lie in `cuda`'s device memory are reached through its view (not owned; it
  // must outlive the world's collectives). Several may be given (ranks of several "hosts").
  // Call before any rank joins.
  void UseDeviceMemory(FakeCudaApi* cuda);
  // The FakeCudaApi whose memory `device_ptr` lies in (null: host memory, or none given).
  FakeCudaApi* DeviceMemoryOf(const void* device_ptr) const;

  // ncclGetUniqueId: kNcclUniqueIdBytes bytes, different each time in this world.
  std::string NewUniqueId();
  // ncclCommInitRank: joins the group of `unique_id` as `rank` of `nranks` (the first rank to
  // join creates it); its init is done once all nranks have joined (Progress).
  // INVALID_ARGUMENT for a rank outside [0, nranks), a rank already joined, or an nranks that
  // differs from the group's.
  absl::StatusOr<NcclComm> Join(absl::string_view unique_id, int nranks, int rank);
  // INVALID_ARGUMENT when `comm` is not a live communicator of this world.
  absl::StatusOr<FakeNcclRank> RankOf(NcclComm comm) const;

  // NCCL's argument checks (INVALID_ARGUMENT), then the group's failure if it failed.
  absl::Status Check(NcclComm comm, const FakeNcclCall& call) const;
  // Check, then issues `call` as this rank's next collective; the last rank to issue one
  // computes it for every rank (or fails the group when the ranks disagree).
  absl::Status Submit(NcclComm comm, const FakeNcclCall& call);
  // kInProgress until every rank has joined and every collective `comm` issued is complete;
  // then kDone. The group's failure once it failed; INVALID_ARGUMENT for a freed handle.
  absl::StatusOr<NcclProgress> Progress(NcclComm comm) const;

  // ncclCommAbort: frees `comm` and fails its group (see above).
  absl::Status Abort(NcclComm comm);
  // ncclCommDestroy: frees `comm`.
  absl::Status Destroy(NcclComm comm);

 private:
  struct Group;
  struct Member {
    Group* group = nullptr;
    int rank = 0;
    size_t issued = 0;  // collectives this rank has issued
    bool live = true;
  };
  // Collective #k: each rank's call, once issued.
  struct Round {
    std::vector<std::optional<FakeNcclCall>> calls;
    int issued = 0;
  };
  struct Group {
    int nranks = 1;
    int joined = 0;
    std::vector<bool> taken;         // by rank
    size_t completed = 0;            // collectives #0 .. #completed-1 are complete
    std::map<size_t, Round> rounds;  // the incomplete ones
    absl::Status failed;             // sticky
  };

  // The live member behind `comm`, or INVALID_ARGUMENT.
  absl::StatusOr<Member*> Find(NcclComm comm) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Compares the ranks' calls of a round every rank has issued, then computes it.
  void Complete(Group& group, size_t index, const Round& round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<FakeCudaApi*> cuda_ ABSL_GUARDED_BY(mu_);
  uint64_t ids_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::unique_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Member>> members_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_WORLD_H_

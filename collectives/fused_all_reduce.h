// FusedAllReduce: gradient fusion. Groups many small tensors into buckets of
// `bytes_per_pack` bytes (one dtype per bucket) and starts each bucket's all-reduce as soon
// as it is full, so communication overlaps the caller's remaining work (the backward pass of
// earlier layers). Tensors of at least `bytes_per_pack` bytes are all-reduced alone.
//
// Zero-copy: a bucket is never packed. It is all-reduced as one vector scattered over its
// tensors (CollectiveCommunicator::AllReducePiecesAsync), reduced where the tensors lie: one
// collective per bucket, with none of the two bucket-sized copies a packing fusion pays (measured:
// they made fusion no faster than separate calls on this machine). The result is bitwise the one a
// packed bucket gives.
//
// Compression::kBF16 (types.h): each f32 tensor is rounded to bf16 in its own buffer when
// added (FloatsToBFloat16 in place: the bf16 values fill the first half of its bytes), its
// bucket all-reduces bf16 (reduce.h: each pairwise step in f32, rounded once), and Finish
// widens the result back in place as each bucket completes. Half the bytes on the wire, no
// buffer of its own, and a tensor in the transport's zero-copy heap stays there. Buckets are
// still cut by the tensors' own bytes, so both settings group a step's tensors alike.
// Compressed f32 tensors share buckets with bf16 ones. Other dtypes travel as they are.
// Where the tensors lie in device memory, which the host cannot read, a Bf16Codec does the
// narrowing and widening instead (below): into its own scratch, on the device's stream.
//
// Use per step: Add() every gradient in the order every rank agrees on, then Finish(),
// which starts the partial buckets (the last on the calling thread) and waits for all. The object
// can be reused for the next step; bucket bookkeeping is kept (no allocation in steady state).
// Ownership: borrows the communicator and the tensors: they must stay valid, and their
// contents unchanged by the caller, from Add() until Finish() returns (a bucket reads and
// writes them while it runs).
// Thread model: one thread at a time.
#ifndef LOCKSTEP_COLLECTIVES_FUSED_ALL_REDUCE_H_
#define LOCKSTEP_COLLECTIVES_FUSED_ALL_REDUCE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/collective_communicator.h"

namespace lockstep {
namespace collectives {

constexpr size_t kDefaultBytesPerPack = 4 << 20;

// How kBF16 compression narrows a tensor for the wire and widens it back when its tensors are
// not host memory: distribute/device_bf16_codec.h narrows a GPU gradient into bf16 device
// scratch with a kernel on the stream its communicator uses (so the collective, enqueued
// after it on that stream, reads it), and widens it back with another. Without a codec
// FusedAllReduce narrows on the host in place. Thread model: called by FusedAllReduce's
// thread (Add, Finish, the destructor) only.
class Bf16Codec {
 public:
  virtual ~Bf16Codec() = default;
  // Starts rounding `count` f32 at `data` to bf16; returns where the bf16 values will lie
  // (count * 2 bytes, ordered before the collective that reads them), held until Widen or
  // Discard.
  virtual absl::StatusOr<void*> Narrow(float* data, size_t count) = 0;
  // Widens the all-reduced `wire` into `data` (ordered after the collective) and releases it.
  virtual absl::Status Widen(void* wire, float* data, size_t count) = 0;
  // Releases `wire` without widening (its collective failed or never ran).
  virtual void Discard(void* wire) = 0;
};

class FusedAllReduce {
 public:
  // `codec` (not owned; may be null: narrowing on the host in place) serves kBF16.
  FusedAllReduce(CollectiveCommunicator* comm, ReduceOp op,
                 size_t bytes_per_pack = kDefaultBytesPerPack,
                 Compression compression = Compression::kNone, Bf16Codec* codec = nullptr);
  ~FusedAllReduce();  // waits for started buckets

  // Adds a tensor to this step, all-reduced in place. `deadline` bounds its bucket. With
  // kBF16 compression an f32 tensor holds bf16 values until Finish returns (with a codec it
  // keeps its f32 values until Finish widens the result into it). When the codec fails to
  // narrow it, the tensor is left out and Finish returns that error (the other ranks' bucket
  // then disagrees with this rank's or waits for its deadline).
  void Add(void* data, size_t count, DType dtype, absl::Time deadline);
  // Starts what is pending, the last bucket on this thread, and waits for every bucket;
  // returns the first error in bucket order (the tensors' contents are then unspecified).
  absl::Status Finish();

  // Buckets started so far in this step (for tests and metrics).
  int buckets_started() const { return started_; }

 private:
  // An f32 tensor that travels as bf16, to widen back once its collective is done.
  struct Narrowed {
    float* data;
    size_t count;
    void* wire;  // where its bf16 values lie: `data` itself without a codec
  };
  struct Bucket {
    DType dtype = DType::kF32;         // on the wire
    size_t used = 0;                   // the tensors' own bytes
    std::vector<BufferPiece> entries;  // the bucket's tensors, in order; capacity kept
    std::vector<Narrowed> narrowed;    // its compressed tensors; capacity kept
    absl::Time deadline = absl::InfiniteFuture();
    Handle handle;
  };
  // A tensor of at least bytes_per_pack bytes, all-reduced alone.
  struct Direct {
    Handle handle;
    Narrowed narrowed;  // count 0: not compressed
  };

  void Launch(Bucket& bucket);
  // f32 -> bf16 for the wire (the codec's or in place); false after recording its error.
  bool Narrow(float* data, size_t count, Narrowed* narrowed);
  // The first error first; then `n` widened back (or released when `ok` is false).
  absl::Status Widen(const Narrowed& n, bool ok);
  Bucket& OpenBucket(DType dtype);

  CollectiveCommunicator* const comm_;
  const ReduceOp op_;
  const size_t bytes_per_pack_;
  const Compression compression_;
  Bf16Codec* const codec_;
  absl::Status narrow_error_;                     // the first failed Narrow of this step
  std::vector<std::unique_ptr<Bucket>> buckets_;  // this step's, in order; reused
  size_t in_use_ = 0;                             // buckets_[0, in_use_) belong to this step
  std::vector<Direct> direct_;                    // large tensors reduced in place
  int started_ = 0;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_FUSED_ALL_REDUCE_H_

#include "collectives/fused_all_reduce.h"

#include <algorithm>

#include "collectives/reduce.h"

namespace lockstep {
namespace collectives {

FusedAllReduce::FusedAllReduce(CollectiveCommunicator* comm, ReduceOp op, size_t bytes_per_pack,
                               Compression compression, Bf16Codec* codec)
    : comm_(comm),
      op_(op),
      bytes_per_pack_(std::max<size_t>(bytes_per_pack, 1)),
      compression_(compression),
      codec_(codec) {}

FusedAllReduce::~FusedAllReduce() {
  for (size_t i = 0; i < in_use_; ++i) {
    if (buckets_[i]->handle) buckets_[i]->handle->Wait().IgnoreError();
    for (const Narrowed& n : buckets_[i]->narrowed) Widen(n, /*ok=*/false).IgnoreError();
  }
  for (auto& d : direct_) {
    d.handle->Wait().IgnoreError();
    if (d.narrowed.count > 0) Widen(d.narrowed, /*ok=*/false).IgnoreError();
  }
}

bool FusedAllReduce::Narrow(float* data, size_t count, Narrowed* narrowed) {
  if (codec_ == nullptr) {
    FloatsToBFloat16(data, reinterpret_cast<uint16_t*>(data), count);
    *narrowed = {data, count, data};
    return true;
  }
  absl::StatusOr<void*> wire = codec_->Narrow(data, count);
  if (!wire.ok()) {
    if (narrow_error_.ok()) narrow_error_ = wire.status();
    return false;
  }
  *narrowed = {data, count, *wire};
  return true;
}

absl::Status FusedAllReduce::Widen(const Narrowed& n, bool ok) {
  if (codec_ == nullptr) {
    if (ok) BFloat16ToFloats(static_cast<const uint16_t*>(n.wire), n.data, n.count);
    return absl::OkStatus();
  }
  if (!ok) {
    codec_->Discard(n.wire);
    return absl::OkStatus();
  }
  return codec_->Widen(n.wire, n.data, n.count);
}

FusedAllReduce::Bucket& FusedAllReduce::OpenBucket(DType dtype) {
  // The open bucket of this dtype is the last one of it not yet started.
  for (size_t i = in_use_; i-- > 0;) {
    Bucket& b = *buckets_[i];
    if (b.dtype == dtype && !b.handle) return b;
  }
  if (in_use_ == buckets_.size()) buckets_.push_back(std::make_unique<Bucket>());
  Bucket& b = *buckets_[in_use_++];
  b.dtype = dtype;
  b.used = 0;
  b.entries.clear();
  b.narrowed.clear();
  b.deadline = absl::InfiniteFuture();
  b.handle.reset();
  return b;
}

void FusedAllReduce::Launch(Bucket& b) {
  b.handle = comm_->AllReducePiecesAsync(b.entries, b.dtype, op_, b.deadline);
  ++started_;
}

void FusedAllReduce::Add(void* data, size_t count, DType dtype, absl::Time deadline) {
  const size_t bytes = count * DTypeSize(dtype);
  if (bytes == 0) return;
  Narrowed narrowed{nullptr, 0, nullptr};
  DType wire = dtype;
  if (compression_ == Compression::kBF16 && dtype == DType::kF32) {
    if (!Narrow(static_cast<float*>(data), count, &narrowed)) return;
    data = narrowed.wire;
    wire = DType::kBF16;
  }
  if (bytes >= bytes_per_pack_) {
    direct_.push_back({comm_->AllReduceAsync(data, data, count, wire, op_, deadline), narrowed});
    ++started_;
    return;
  }
  Bucket* b = &OpenBucket(wire);
  if (b->used + bytes > bytes_per_pack_) {
    Launch(*b);
    b = &OpenBucket(wire);
  }
  b->entries.push_back({data, count * DTypeSize(wire)});
  if (narrowed.count > 0) b->narrowed.push_back(narrowed);
  b->used += bytes;
  b->deadline = std::min(b->deadline, deadline);
  if (b->used == bytes_per_pack_) Launch(*b);
}

absl::Status FusedAllReduce::Finish() {
  // The partial buckets start in order; the last of them runs on this thread, which would
  // only wait for it, rather than being handed to the communicator's thread and back.
  // Measured with `lockstep bench allreduce --np 2 --transport tcp` (one 4000 KiB bucket),
  // 14 alternating runs each: fused 667 us median against 704 us; over shm, no difference.
  // Behind earlier buckets still running it queues as they do.
  Bucket* last = nullptr;
  for (size_t i = 0; i < in_use_; ++i) {
    if (buckets_[i]->handle) continue;
    if (last != nullptr) Launch(*last);
    last = buckets_[i].get();
  }
  absl::Status last_status;
  if (last != nullptr) {
    last_status = comm_->AllReducePieces(last->entries, last->dtype, op_, last->deadline);
    ++started_;
  }
  // Compressed tensors are widened as their bucket completes, while later ones still run.
  // A tensor left out (its narrowing failed) is the cause of what its peers then see.
  absl::Status first = narrow_error_;  // then in bucket order: an earlier bucket's error
  narrow_error_ = absl::OkStatus();
  for (size_t i = 0; i < in_use_; ++i) {
    Bucket& b = *buckets_[i];
    absl::Status s = &b == last ? last_status : b.handle->Wait();
    if (!s.ok() && first.ok()) first = s;
    for (const Narrowed& n : b.narrowed) first.Update(Widen(n, first.ok()));
    b.narrowed.clear();
    b.handle.reset();
  }
  for (Direct& d : direct_) {
    absl::Status s = d.handle->Wait();
    if (!s.ok() && first.ok()) first = s;
    if (d.narrowed.count > 0) first.Update(Widen(d.narrowed, first.ok()));
  }
  direct_.clear();
  in_use_ = 0;
  started_ = 0;
  return first;
}

}  // namespace collectives
}  // namespace lockstep

#include "collectives/algorithms/algorithms.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "collectives/reduce.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Element range [start, start + len) of block b when `count` elements are split into n
// nearly equal blocks (sizes differ by at most one; any may be empty).
struct Range {
  size_t start = 0;
  size_t len = 0;
};
Range BlockOf(size_t count, int n, int b) {
  size_t s = count * static_cast<size_t>(b) / n;
  size_t e = count * static_cast<size_t>(b + 1) / n;
  return {s, e - s};
}

// A vector of bytes laid over one or more pieces of memory. Offsets are in bytes from the
// start of the whole vector; At() gives the address of one and how many bytes follow it
// contiguously. No allocation for the contiguous case.
class View {
 public:
  View(char* base, size_t bytes) { Append(base, bytes); }
  explicit View(absl::Span<const BufferPiece> pieces) {
    for (const BufferPiece& p : pieces) Append(static_cast<char*>(p.data), p.bytes);
  }
  size_t bytes() const { return ends_.empty() ? 0 : ends_.back(); }
  // Address of byte `off` (< bytes()) and the contiguous bytes from there.
  std::pair<char*, size_t> At(size_t off) const {
    size_t i = std::upper_bound(ends_.begin(), ends_.end(), off) - ends_.begin();
    const size_t start = i == 0 ? 0 : ends_[i - 1];
    return {bases_[i] + (off - start), ends_[i] - off};
  }
  // Appends to `out` the pieces that hold bytes [off, off + len) (within bytes()).
  template <typename Out>
  void Slice(size_t off, size_t len, Out* out) const {
    while (len > 0) {
      auto [p, run] = At(off);
      const size_t k = std::min(run, len);
      out->push_back({p, k});
      off += k;
      len -= k;
    }
  }
  template <typename F>
  void ForEachPiece(F&& f) const {
    for (size_t i = 0; i < bases_.size(); ++i) f(bases_[i], ends_[i] - (i == 0 ? 0 : ends_[i - 1]));
  }

 private:
  void Append(char* base, size_t bytes) {
    if (bytes == 0) return;
    bases_.push_back(base);
    ends_.push_back(this->bytes() + bytes);
  }
  absl::InlinedVector<char*, 1> bases_;
  absl::InlinedVector<size_t, 1> ends_;  // ends_[i]: offset one past piece i
};

// One exchange of a range of elements with a neighbour, split into messages of at most
// `seg` elements. A message that spans pieces of `v` goes as one scattered message
// (SendSpec/RecvSpec pieces): a fused bucket moves in whole segments, not one message per
// tensor. If `reduce`, received bytes are combined into `v` as they arrive.
absl::Status Exchange(Transport& t, int to, Range send, int from, Range recv, const View& v,
                      size_t esize, size_t seg, bool reduce, DType dtype, ReduceOp op,
                      absl::Time deadline) {
  absl::InlinedVector<BufferPiece, 4> send_pieces, recv_pieces;
  size_t s_off = 0, r_off = 0;
  while (s_off < send.len || r_off < recv.len) {
    SendSpec s{to, nullptr, 0};
    RecvSpec r{from, nullptr, 0, esize, nullptr};
    const size_t s_len = std::min(seg, send.len - s_off);
    const size_t r_len = std::min(seg, recv.len - r_off);
    const size_t s_at = (send.start + s_off) * esize, r_at = (recv.start + r_off) * esize;
    if (s_len > 0) {
      s.len = s_len * esize;
      auto [p, run] = v.At(s_at);
      if (run >= s.len) {
        s.data = p;
      } else {
        send_pieces.clear();
        v.Slice(s_at, s.len, &send_pieces);
        s.pieces = absl::MakeConstSpan(send_pieces);
      }
    }
    if (r_len > 0) {
      r.len = r_len * esize;
      auto [p, run] = v.At(r_at);
      if (run >= r.len) {
        r.data = p;
      } else if (!reduce) {
        recv_pieces.clear();
        v.Slice(r_at, r.len, &recv_pieces);
        r.pieces = absl::MakeConstSpan(recv_pieces);
      }
    }
    // Pieces of the message arrive whole elements at a time; piece boundaries of `v` are
    // element boundaries too.
    auto combine = [&](size_t offset, const void* data, size_t len) {
      const char* in = static_cast<const char*>(data);
      while (len > 0) {
        auto [p, run] = v.At(r_at + offset);
        const size_t k = std::min(run, len);
        Reduce(dtype, op, p, in, k / esize);
        in += k;
        offset += k;
        len -= k;
      }
    };
    RecvSink sink(combine);
    if (reduce) r.sink = &sink;
    LS_RETURN_IF_ERROR(t.SendRecv(s, r, deadline));
    s_off += s_len;
    r_off += r_len;
  }
  return absl::OkStatus();
}

void FinishMeanView(DType dtype, ReduceOp op, const View& v, int world_size) {
  const size_t esize = DTypeSize(dtype);
  v.ForEachPiece(
      [&](char* p, size_t bytes) { FinishMean(dtype, op, p, bytes / esize, world_size); });
}

size_t SegmentElems(size_t chunk_bytes, size_t esize) {
  return std::max<size_t>(1, chunk_bytes / esize);
}

// Ring reduce-scatter over `count` elements in n blocks; rank r ends owning the fully
// reduced block (r + 1 + shift) mod n.
absl::Status RingReduceScatterBlocks(Transport& t, size_t chunk_bytes, const View& base,
                                     size_t count, DType dtype, ReduceOp op, int shift,
                                     absl::Time deadline) {
  const int n = t.size(), r = t.rank();
  const size_t esize = DTypeSize(dtype);
  const int right = Mod(r + 1, n), left = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    Range send = BlockOf(count, n, Mod(r - s + shift, n));
    Range recv = BlockOf(count, n, Mod(r - s - 1 + shift, n));
    LS_RETURN_IF_ERROR(Exchange(t, right, send, left, recv, base, esize,
                                SegmentElems(chunk_bytes, esize), true, dtype, op, deadline));
  }
  return absl::OkStatus();
}

// Ring all-gather where rank r starts owning block (r + first) mod n.
absl::Status RingAllGatherBlocks(Transport& t, size_t chunk_bytes, const View& base, size_t count,
                                 size_t esize, int first, absl::Time deadline) {
  const int n = t.size(), r = t.rank();
  const int right = Mod(r + 1, n), left = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    Range send = BlockOf(count, n, Mod(r + first - s, n));
    Range recv = BlockOf(count, n, Mod(r + first - s - 1, n));
    LS_RETURN_IF_ERROR(Exchange(t, right, send, left, recv, base, esize,
                                SegmentElems(chunk_bytes, esize), false, DType::kF32,
                                ReduceOp::kSum, deadline));
  }
  return absl::OkStatus();
}

// The group as a ring in AlgorithmOptions::ring_order: rank() is this rank's position and
// peers are named by position; everything else is the underlying transport's.
class RingOrderTransport final : public Transport {
 public:
  RingOrderTransport(Transport& base, const std::vector<int>& order) : base_(base), order_(order) {
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] == base.rank()) position_ = static_cast<int>(i);
    }
  }
  int rank() const override { return position_; }
  int size() const override { return base_.size(); }
  absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) override {
    SendSpec s = send;
    RecvSpec r = recv;
    if (s.peer != kNoPeer) s.peer = order_[s.peer];
    if (r.peer != kNoPeer) r.peer = order_[r.peer];
    return base_.SendRecv(s, r, deadline);
  }
  void Abort() override { base_.Abort(); }
  void AbortOnPeerFailure(int failed_rank) override { base_.AbortOnPeerFailure(failed_rank); }
  std::shared_ptr<TransportHeap> heap() const override { return base_.heap(); }

 private:
  Transport& base_;
  const std::vector<int>& order_;
  int position_ = 0;
};

absl::Status WithContext(absl::Status s, const char* what, const Transport& t) {
  if (s.ok()) return s;
  return Annotate(s, absl::StrCat(what, " (rank ", t.rank(), " of ", t.size(), ")"));
}

}  // namespace

namespace {
absl::Status RingAllReduceView(Transport& t, size_t chunk_bytes, const View& v, size_t count,
                               DType dtype, ReduceOp op, absl::Time deadline) {
  absl::Status s =
      RingReduceScatterBlocks(t, chunk_bytes, v, count, dtype, op, /*shift=*/0, deadline);
  if (s.ok()) {
    s = RingAllGatherBlocks(t, chunk_bytes, v, count, DTypeSize(dtype), /*first=*/1, deadline);
  }
  LS_RETURN_IF_ERROR(WithContext(s, "ring all-reduce", t));
  FinishMeanView(dtype, op, v, t.size());
  return absl::OkStatus();
}
}  // namespace

absl::Status CheckPieces(absl::Span<const BufferPiece> pieces, DType dtype) {
  for (const BufferPiece& p : pieces) {
    if (p.bytes % DTypeSize(dtype) != 0 || (p.bytes > 0 && p.data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "all-reduce of pieces: a piece of ", p.bytes, " bytes is not a whole number of ",
          DTypeName(dtype), " elements or has no buffer; check the tensors' sizes and dtypes"));
    }
  }
  return absl::OkStatus();
}

std::vector<int> RingOrderForCpus(const std::vector<int>& cpus) {
  std::vector<int> order(cpus.size());
  for (size_t r = 0; r < cpus.size(); ++r) {
    if (cpus[r] < 0) return {};
    order[r] = static_cast<int>(r);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cpus[a] < cpus[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (cpus[order[i]] == cpus[order[i - 1]]) return order;
  }
  return {};
}

namespace {

// Non-powers of two fold their extra ranks into neighbours first: among the first 2*rem
// ranks (rem = n - p, p the largest power of two <= n), even ranks hand their vector to the
// odd neighbour and sit out. Returns this rank's number among the p that go on, or -1.
absl::StatusOr<int> Fold(Transport& t, const View& v, size_t count, DType dtype, ReduceOp op,
                         int rem, absl::Time deadline) {
  const int r = t.rank();
  const size_t esize = DTypeSize(dtype), whole = std::max<size_t>(count, 1);
  if (r >= 2 * rem) return r - rem;
  if (r % 2 == 0) {
    LS_RETURN_IF_ERROR(Exchange(t, r + 1, {0, count}, kNoPeer, {0, 0}, v, esize, whole, false,
                                dtype, op, deadline));
    return -1;
  }
  LS_RETURN_IF_ERROR(
      Exchange(t, kNoPeer, {0, 0}, r - 1, {0, count}, v, esize, whole, true, dtype, op, deadline));
  return r / 2;
}

// Unfold: odd ranks hand the result back to the even neighbour that sat out.
absl::Status Unfold(Transport& t, const View& v, size_t count, DType dtype, int rem,
                    absl::Time deadline) {
  const int r = t.rank();
  if (r >= 2 * rem) return absl::OkStatus();
  const size_t esize = DTypeSize(dtype), whole = std::max<size_t>(count, 1);
  if (r % 2 == 1) {
    return Exchange(t, r - 1, {0, count}, kNoPeer, {0, 0}, v, esize, whole, false, dtype,
                    ReduceOp::kSum, deadline);
  }
  return Exchange(t, kNoPeer, {0, 0}, r + 1, {0, count}, v, esize, whole, false, dtype,
                  ReduceOp::kSum, deadline);
}

int PowerOfTwoBelow(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Rabenseifner over a vector of `count` elements laid over `v` (one buffer or many pieces):
// fold, recursive halving (reduce-scatter), recursive doubling (all-gather), unfold. Each
// exchange reduces where the elements lie, so a fused bucket needs no packing copy.
absl::Status HalvingDoublingView(Transport& t, const View& v, size_t count, DType dtype,
                                 ReduceOp op, absl::Time deadline) {
  const int n = t.size();
  const size_t esize = DTypeSize(dtype), whole = std::max<size_t>(count, 1);
  const int p = PowerOfTwoBelow(n), rem = n - p;
  auto real = [&](int nr) { return nr < rem ? 2 * nr + 1 : nr + rem; };
  absl::StatusOr<int> folded = Fold(t, v, count, dtype, op, rem, deadline);
  absl::Status s = folded.status();
  const int newrank = folded.ok() ? *folded : -1;
  if (newrank >= 0) {
    Range stack[64];  // one entry per halving step (log2 p); no allocation per call
    int depth = 0;
    size_t lo = 0, hi = count;
    for (int mask = p / 2; mask >= 1 && s.ok(); mask /= 2) {
      const int partner = real(newrank ^ mask);
      const size_t mid = lo + (hi - lo) / 2;
      Range keep{lo, mid - lo}, give{mid, hi - mid};
      if (newrank & mask) std::swap(keep, give);
      stack[depth++] = {lo, hi - lo};
      s = Exchange(t, partner, give, partner, keep, v, esize, whole, true, dtype, op, deadline);
      lo = keep.start;
      hi = keep.start + keep.len;
    }
    for (int mask = 1; mask < p && s.ok(); mask *= 2) {
      const int partner = real(newrank ^ mask);
      Range parent = stack[--depth];
      Range mine{lo, hi - lo};
      Range other = lo == parent.start ? Range{hi, parent.start + parent.len - hi}
                                       : Range{parent.start, lo - parent.start};
      s = Exchange(t, partner, mine, partner, other, v, esize, whole, false, dtype, op, deadline);
      lo = parent.start;
      hi = parent.start + parent.len;
    }
  }
  if (s.ok()) s = Unfold(t, v, count, dtype, rem, deadline);
  LS_RETURN_IF_ERROR(WithContext(s, "halving-doubling all-reduce", t));
  FinishMeanView(dtype, op, v, n);
  return absl::OkStatus();
}

}  // namespace

namespace {

// Fold, then log2(p) exchanges of the whole vector (laid over `v`) between the remaining p
// ranks, unfold.
absl::Status RecursiveDoublingView(Transport& t, const View& v, size_t count, DType dtype,
                                   ReduceOp op, absl::Time deadline) {
  const int p = PowerOfTwoBelow(t.size()), rem = t.size() - p;
  const size_t esize = DTypeSize(dtype), all = count * esize;
  absl::StatusOr<int> folded = Fold(t, v, count, dtype, op, rem, deadline);
  absl::Status s = folded.status();
  const int newrank = folded.ok() ? *folded : -1;
  if (newrank >= 0) {
    auto real = [&](int nr) { return nr < rem ? 2 * nr + 1 : nr + rem; };
    // Whole-vector exchanges: a op b on one side, b op a on the other, bitwise equal.
    // The partner's vector lands in scratch (ours is being sent meanwhile), then is reduced
    // into ours where it lies. Larger vectors use this thread's scratch, kept between calls:
    // no allocation and no zero-fill per call (TCP pairs run recursive doubling up to 1 MiB).
    alignas(64) char small[16 << 10];
    thread_local std::unique_ptr<char[]> large;
    thread_local size_t large_bytes = 0;
    char* theirs = small;
    if (all > sizeof(small)) {
      if (large_bytes < all) {
        large.reset(new char[all]);
        large_bytes = all;
      }
      theirs = large.get();
    }
    absl::InlinedVector<BufferPiece, 4> mine;
    v.Slice(0, all, &mine);
    SendSpec send{kNoPeer, mine[0].data, all};
    if (mine.size() > 1) send.pieces = absl::MakeConstSpan(mine);
    for (int mask = 1; mask < p && s.ok(); mask *= 2) {
      send.peer = real(newrank ^ mask);
      s = t.SendRecv(send, {send.peer, theirs, all}, deadline);
      size_t at = 0;
      for (const BufferPiece& piece : mine) {
        if (!s.ok()) break;
        Reduce(dtype, op, piece.data, theirs + at, piece.bytes / esize);
        at += piece.bytes;
      }
    }
  }
  if (s.ok()) s = Unfold(t, v, count, dtype, rem, deadline);
  LS_RETURN_IF_ERROR(WithContext(s, "recursive-doubling all-reduce", t));
  FinishMeanView(dtype, op, v, t.size());
  return absl::OkStatus();
}

// The all-reduce dispatch, for a contiguous vector and a fused bucket alike: cuts `v` into
// segments (AlgorithmOptions::segment_bytes, with kAuto) and runs the algorithm each
// segment's size chooses (ChooseAllReduce), reducing where the bytes lie.
absl::Status AllReduceView(Transport& t, const AlgorithmOptions& options, const View& v,
                           DType dtype, ReduceOp op, absl::Time deadline) {
  const size_t esize = DTypeSize(dtype), bytes = v.bytes();
  if (t.size() == 1 || bytes == 0) {
    FinishMeanView(dtype, op, v, t.size());
    return absl::OkStatus();
  }
  size_t seg = bytes;
  if (options.algorithm == AllReduceAlgorithm::kAuto && options.segment_bytes > 0 &&
      bytes > options.segment_bytes) {
    seg = std::max<size_t>(1, options.segment_bytes / esize) * esize;
  }
  absl::InlinedVector<BufferPiece, 8> pieces;
  for (size_t at = 0; at < bytes; at += seg) {
    const size_t n = std::min(seg, bytes - at);
    std::optional<View> cut;  // the segment, when the vector is cut
    if (n < bytes) {
      pieces.clear();
      v.Slice(at, n, &pieces);
      cut.emplace(absl::MakeConstSpan(pieces));
    }
    const View& part = cut.has_value() ? *cut : v;
    switch (ChooseAllReduce(options, n)) {
      case AllReduceAlgorithm::kRing:
        if (options.ring_order.empty()) {
          LS_RETURN_IF_ERROR(
              RingAllReduceView(t, options.chunk_bytes, part, n / esize, dtype, op, deadline));
        } else {
          RingOrderTransport ring(t, options.ring_order);
          LS_RETURN_IF_ERROR(
              RingAllReduceView(ring, options.chunk_bytes, part, n / esize, dtype, op, deadline));
        }
        break;
      case AllReduceAlgorithm::kHalvingDoubling:
        LS_RETURN_IF_ERROR(HalvingDoublingView(t, part, n / esize, dtype, op, deadline));
        break;
      default:
        LS_RETURN_IF_ERROR(RecursiveDoublingView(t, part, n / esize, dtype, op, deadline));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AllReduce(Transport& t, const AlgorithmOptions& options, void* buf, size_t count,
                       DType dtype, ReduceOp op, absl::Time deadline) {
  return AllReduceView(t, options, View(static_cast<char*>(buf), count * DTypeSize(dtype)), dtype,
                       op, deadline);
}

absl::Status AllReducePieces(Transport& t, const AlgorithmOptions& options,
                             absl::Span<const BufferPiece> pieces, DType dtype, ReduceOp op,
                             absl::Time deadline) {
  LS_RETURN_IF_ERROR(CheckPieces(pieces, dtype));
  return AllReduceView(t, options, View(pieces), dtype, op, deadline);
}

absl::Status Broadcast(Transport& t, const AlgorithmOptions& options, void* buf, size_t bytes,
                       int root, absl::Time deadline) {
  const int n = t.size();
  if (n == 1 || bytes == 0) return absl::OkStatus();
  const int rel = Mod(t.rank() - root, n);
  auto real = [&](int x) { return Mod(x + root, n); };
  char* base = static_cast<char*>(buf);
  absl::Status s;
  if (bytes < options.broadcast_chain_threshold_bytes || n == 2) {
    // Binomial tree: receive from the parent, then send to children, largest subtree first.
    int mask = 1;
    while (mask < n) {
      if (rel & mask) {
        s = t.SendRecv({}, {real(rel - mask), base, bytes}, deadline);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0 && s.ok(); mask >>= 1) {
      if (rel + mask < n) s = t.SendRecv({real(rel + mask), base, bytes}, {}, deadline);
    }
  } else {
    // Pipelined chain root -> root+1 -> ...: forward segment k-1 while receiving segment k.
    const size_t seg = std::max<size_t>(1, options.chunk_bytes);
    const size_t nseg = (bytes + seg - 1) / seg;
    const int next = rel + 1 < n ? real(rel + 1) : kNoPeer;
    const int prev = rel > 0 ? real(rel - 1) : kNoPeer;
    auto seg_len = [&](size_t k) { return std::min(seg, bytes - k * seg); };
    for (size_t k = 0; k <= nseg && s.ok(); ++k) {
      SendSpec send;
      RecvSpec recv;
      if (rel == 0) {
        if (k < nseg) send = {next, base + k * seg, seg_len(k)};
      } else {
        if (k >= 1) send = {next, base + (k - 1) * seg, seg_len(k - 1)};
        if (k < nseg) recv = {prev, base + k * seg, seg_len(k)};
      }
      s = t.SendRecv(send, recv, deadline);
    }
  }
  return WithContext(s, "broadcast", t);
}

absl::Status RingAllGather(Transport& t, size_t chunk_bytes, void* buf, size_t block_bytes,
                           absl::Time deadline) {
  if (t.size() == 1 || block_bytes == 0) return absl::OkStatus();
  // Blocks are equal, so BlockOf over n * block_bytes "elements" of one byte is exact.
  absl::Status s =
      RingAllGatherBlocks(t, chunk_bytes, View(static_cast<char*>(buf), block_bytes * t.size()),
                          block_bytes * t.size(), 1, /*first=*/0, deadline);
  return WithContext(s, "ring all-gather", t);
}

absl::Status RingReduceScatter(Transport& t, size_t chunk_bytes, void* buf, size_t block_count,
                               DType dtype, ReduceOp op, absl::Time deadline) {
  const int n = t.size();
  char* base = static_cast<char*>(buf);
  if (n > 1 && block_count > 0) {
    const View view(base, block_count * n * DTypeSize(dtype));
    absl::Status s = RingReduceScatterBlocks(t, chunk_bytes, view, block_count * n, dtype, op,
                                             /*shift=*/-1, deadline);
    LS_RETURN_IF_ERROR(WithContext(s, "ring reduce-scatter", t));
  }
  FinishMean(dtype, op, base + t.rank() * block_count * DTypeSize(dtype), block_count, n);
  return absl::OkStatus();
}

absl::Status DisseminationBarrier(Transport& t, absl::Time deadline) {
  const int n = t.size(), r = t.rank();
  char out = 1, in = 0;
  for (int k = 1; k < n; k *= 2) {
    absl::Status s = t.SendRecv({Mod(r + k, n), &out, 1}, {Mod(r - k, n), &in, 1}, deadline);
    LS_RETURN_IF_ERROR(WithContext(s, "barrier", t));
  }
  return absl::OkStatus();
}

}  // namespace collectives
}  // namespace lockstep

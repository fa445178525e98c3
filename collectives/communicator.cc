#include "collectives/communicator.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/observed_transport.h"
#include "collectives/transport/peer_failure.h"
#include "common/sched.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace collectives {
namespace {

// INVALID_ARGUMENT when `buffer` (the argument `name` of `collective`) is null but must hold
// `count` > 0 elements.
absl::Status CheckBuffer(const char* collective, int rank, const char* name, const void* buffer,
                         size_t count) {
  if (buffer != nullptr || count == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(collective, " on rank ", rank, ": `", name,
                                                 "` is null but count is ", count,
                                                 "; pass a buffer (null only with count 0)"));
}

absl::Status CheckSendRecv(const char* collective, int rank, const void* send, const void* recv,
                           size_t count) {
  LS_RETURN_IF_ERROR(CheckBuffer(collective, rank, "send", send, count));
  return CheckBuffer(collective, rank, "recv", recv, count);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    std::unique_ptr<Transport> transport, const AlgorithmOptions& requested,
    CollectiveObserver* observer) {
  if (transport == nullptr) return absl::InvalidArgumentError("communicator: null transport");
  // What CreateCommunicator did not choose for its transport gets the defaults.
  const AlgorithmOptions options =
      ResolveAlgorithmOptions(requested, TransportKind::kAuto, transport->size());
  if (options.chunk_bytes == 0) {
    return absl::InvalidArgumentError("communicator: chunk_bytes must be positive");
  }
  if (!options.ring_order.empty()) {
    std::vector<int> sorted = options.ring_order;
    std::sort(sorted.begin(), sorted.end());
    bool permutation = sorted.size() == static_cast<size_t>(transport->size());
    for (size_t i = 0; i < sorted.size() && permutation; ++i) {
      permutation = sorted[i] == static_cast<int>(i);
    }
    if (!permutation) {
      return absl::InvalidArgumentError(absl::StrCat(
          "communicator: ring_order must name every rank of the group of ", transport->size(),
          " exactly once, got [", absl::StrJoin(options.ring_order, ","), "]"));
    }
  }
  if (observer != nullptr && observer->counts_bytes()) {
    transport = std::make_unique<ObservedTransport>(std::move(transport), observer);
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(transport), options, observer));
}

Communicator::Communicator(std::unique_ptr<Transport> transport, const AlgorithmOptions& options,
                           CollectiveObserver* observer)
    : transport_(std::move(transport)), options_(options), observer_(observer) {
  worker_ = std::thread([this] { WorkerLoop(); });
}

Communicator::~Communicator() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

void Communicator::Abort() {
  aborted_.store(true);
  transport_->Abort();
}

absl::Status Communicator::Usable() {
  if (aborted_.load()) {
    return absl::AbortedError(absl::StrCat("communicator rank ", rank(), " was aborted"));
  }
  if (has_failed_.load()) {
    absl::MutexLock lock(&mu_);
    return Annotate(failed_, absl::StrCat("an earlier collective failed on rank ", rank()));
  }
  return absl::OkStatus();
}

template <typename F>
absl::Status Communicator::Execute(const char* what, size_t bytes, F&& body) {
  LS_RETURN_IF_ERROR(Usable());
  const CollectiveCall call{collectives_run_.fetch_add(1) + 1, what, bytes};
  if (observer_ != nullptr) observer_->OnEnter(call);
  absl::Status s = body();
  if (observer_ != nullptr) observer_->OnLeave(call, s);
  if (!s.ok()) {
    if (aborted_.load()) {
      s = absl::AbortedError(
          absl::StrCat("communicator rank ", rank(), " was aborted: ", s.message()));
    }
    // Tell the peers at once (they see this rank leave: UNAVAILABLE) rather than letting
    // them wait for their deadlines, and which rank the failure started at when it started
    // elsewhere, so that they name it rather than this rank. A deadline stays local: the
    // peers have their own.
    if (s.code() != absl::StatusCode::kDeadlineExceeded) {
      const std::optional<int> failed_rank = FailedRank(s);
      if (failed_rank.has_value() && *failed_rank != rank()) {
        transport_->AbortOnPeerFailure(*failed_rank);
      } else {
        transport_->Abort();
      }
    }
    absl::MutexLock lock(&mu_);
    MarkFailedLocked(s);
  }
  return s;
}

void Communicator::MarkFailedLocked(const absl::Status& s) {
  if (failed_.ok()) failed_ = s;
  has_failed_.store(true);
}

void Communicator::WorkerLoop() {
  if (options_.progress_thread_slice > absl::ZeroDuration()) {
    absl::Status s = RequestSchedulerSlice(options_.progress_thread_slice);
    if (!s.ok()) {
      spdlog::warn(
          "collectives: rank {}: the communicator thread keeps the default scheduler "
          "slice ({}); all-reduces overlapped with compute may progress slowly",
          rank(), s.ToString());
    }
  }
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return (!queue_.empty() || stopping_) && !busy_.load();
    };
    mu_.Await(absl::Condition(&ready));
    if (queue_.empty()) return;  // stopping
    bool idle = false;
    if (!busy_.compare_exchange_strong(idle, true)) continue;  // a sync call got in first
    Op op = std::move(queue_.front());
    queue_.pop_front();
    queued_.fetch_sub(1);
    mu_.Unlock();
    const absl::Time started = absl::Now();
    absl::Status s = Execute(op.what, op.bytes, [&] {
      // An op that could not start by its deadline fails at once rather than late (and a sync
      // caller that gave up waiting for it, RunQueued, is not held any longer).
      if (started >= op.deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", rank(), ": ", op.what,
            " reached its deadline before it could start, queued behind earlier collectives; "
            "is a peer stopped or overloaded?"));
      }
      return op.body();
    });
    if (s.ok() && op.all_reduce_bytes > 0) CountAllReduce(op.all_reduce_bytes, started);
    op.handle->Finish(std::move(s));
    mu_.Lock();
    busy_.store(false);
  }
}

void Communicator::CountAllReduce(size_t bytes, absl::Time started) {
  const absl::Duration took = absl::Now() - started;
  async_all_reduce_bytes_.fetch_add(static_cast<int64_t>(bytes));
  async_all_reduce_ns_.fetch_add(absl::ToInt64Nanoseconds(took));
  if (observer_ != nullptr) observer_->AllReduceDone(bytes, took, size());
}

Communicator::AllReduceTotals Communicator::async_all_reduce_totals() const {
  return {async_all_reduce_bytes_.load(), absl::Nanoseconds(async_all_reduce_ns_.load())};
}

Handle Communicator::Submit(Body body, absl::Time deadline, const char* what,
                            size_t all_reduce_bytes, size_t bytes) {
  // A failed or aborted communicator answers at once, not after the collectives queued before
  // (one may run until its deadline).
  absl::Status usable = Usable();
  if (!usable.ok()) return Finished(std::move(usable));
  auto handle = std::make_shared<CollectiveHandle>();
  absl::MutexLock lock(&mu_);
  queue_.push_back(Op{std::move(body), handle, deadline, what, all_reduce_bytes,
                      std::max(bytes, all_reduce_bytes)});
  queued_.fetch_add(1);
  return handle;
}

absl::Status Communicator::RunQueued(Body body, absl::Time deadline, const char* what,
                                     size_t bytes) {
  Handle handle = Submit(std::move(body), deadline, what, 0, bytes);
  if (handle->WaitUntil(deadline)) return handle->Wait();
  // The deadline passed while the op waited its turn. Its body points into the caller's
  // buffers, so this call must not return while the op may still run: take it out of the
  // queue, where it never runs, or, if the worker has taken it already, wait for it. That
  // wait is short: the op started at or after its deadline, so it fails at once (WorkerLoop)
  // or runs with its deadline passed, which the transports enforce.
  {
    absl::MutexLock lock(&mu_);
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const Op& op) { return op.handle == handle; });
    if (it != queue_.end()) {
      const size_t ahead = (it - queue_.begin()) + (busy_.load() ? 1 : 0);
      queue_.erase(it);
      queued_.fetch_sub(1);
      absl::Status s = absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank(), ": ", what, " reached its deadline waiting for ", ahead,
          " earlier async collective(s) to finish; is a peer stopped or overloaded, or do the "
          "earlier collectives have later deadlines?"));
      // The peers run the collective this rank skipped: the group is out of step, as after
      // any deadline (the transport stays open: the peers have deadlines of their own).
      MarkFailedLocked(s);
      return s;
    }
  }
  return handle->Wait();
}

template <typename F>
absl::Status Communicator::RunNow(F&& body, absl::Time deadline, const char* what, size_t bytes) {
  bool idle = false;
  // Keep call order: queue behind the pending async collectives.
  if (queued_.load() > 0 || !busy_.compare_exchange_strong(idle, true)) {
    return RunQueued(Body(std::forward<F>(body)), deadline, what, bytes);
  }
  absl::Status s = Execute(what, bytes, body);
  busy_.store(false);
  // The worker waits for !busy_ only under mu_: let it re-check (Dekker with Submit, which
  // counts queued_ before it releases mu_).
  if (queued_.load() > 0) {
    mu_.Lock();
    mu_.Unlock();
  }
  return s;
}

absl::Status Communicator::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op, absl::Time deadline) {
  LS_RETURN_IF_ERROR(CheckSendRecv("all-reduce", rank(), send, recv, count));
  return RunNow(
      [=] {
        if (send != recv && count > 0) std::memcpy(recv, send, count * DTypeSize(dtype));
        return collectives::AllReduce(*transport_, options_, recv, count, dtype, op, deadline);
      },
      deadline, "all-reduce", count * DTypeSize(dtype));
}

Handle Communicator::AllReduceAsync(const void* send, void* recv, size_t count, DType dtype,
                                    ReduceOp op, absl::Time deadline) {
  absl::Status s = CheckSendRecv("all-reduce", rank(), send, recv, count);
  if (!s.ok()) return Finished(std::move(s));
  return Submit(
      [=] {
        if (send != recv && count > 0) std::memcpy(recv, send, count * DTypeSize(dtype));
        return collectives::AllReduce(*transport_, options_, recv, count, dtype, op, deadline);
      },
      deadline, "all-reduce", count * DTypeSize(dtype));
}

absl::StatusOr<size_t> Communicator::PiecesBytes(absl::Span<const BufferPiece> pieces,
                                                 DType dtype) const {
  absl::Status s = CheckPieces(pieces, dtype);
  if (!s.ok()) return Annotate(s, absl::StrCat("rank ", rank()));
  size_t bytes = 0;
  for (const BufferPiece& p : pieces) bytes += p.bytes;
  return bytes;
}

Handle Communicator::AllReducePiecesAsync(absl::Span<const BufferPiece> pieces, DType dtype,
                                          ReduceOp op, absl::Time deadline) {
  absl::StatusOr<size_t> checked = PiecesBytes(pieces, dtype);
  if (!checked.ok()) return Finished(checked.status());
  const size_t bytes = *checked;
  return Submit(
      [=] {
        return collectives::AllReducePieces(*transport_, options_, pieces, dtype, op, deadline);
      },
      deadline, "all-reduce of pieces", bytes);
}

absl::Status Communicator::AllReducePieces(absl::Span<const BufferPiece> pieces, DType dtype,
                                           ReduceOp op, absl::Time deadline) {
  LS_ASSIGN_OR_RETURN(const size_t bytes, PiecesBytes(pieces, dtype));
  return RunNow(
      [=] {
        const absl::Time started = absl::Now();
        absl::Status s =
            collectives::AllReducePieces(*transport_, options_, pieces, dtype, op, deadline);
        if (s.ok()) CountAllReduce(bytes, started);
        return s;
      },
      deadline, "all-reduce of pieces", bytes);
}

absl::Status Communicator::CheckBroadcast(const void* buf, size_t count, int root) const {
  if (root < 0 || root >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast on rank ", rank(), ": root ", root,
                                                   " is not a rank of a group of ", size()));
  }
  return CheckBuffer("broadcast", rank(), "buf", buf, count);
}

absl::Status Communicator::Broadcast(void* buf, size_t count, DType dtype, int root,
                                     absl::Time deadline) {
  LS_RETURN_IF_ERROR(CheckBroadcast(buf, count, root));
  return RunNow(
      [=] {
        return collectives::Broadcast(*transport_, options_, buf, count * DTypeSize(dtype), root,
                                      deadline);
      },
      deadline, "broadcast", count * DTypeSize(dtype));
}

Handle Communicator::BroadcastAsync(void* buf, size_t count, DType dtype, int root,
                                    absl::Time deadline) {
  absl::Status s = CheckBroadcast(buf, count, root);
  if (!s.ok()) return Finished(std::move(s));
  return Submit(
      [=] {
        return collectives::Broadcast(*transport_, options_, buf, count * DTypeSize(dtype), root,
                                      deadline);
      },
      deadline, "broadcast", 0, count * DTypeSize(dtype));
}

absl::Status Communicator::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                     absl::Time deadline) {
  LS_RETURN_IF_ERROR(CheckSendRecv("all-gather", rank(), send, recv, count));
  return RunNow(
      [=] {
        const size_t block = count * DTypeSize(dtype);
        char* out = static_cast<char*>(recv);
        if (send != out + rank() * block && block > 0) {
          std::memcpy(out + rank() * block, send, block);
        }
        return RingAllGather(*transport_, options_.chunk_bytes, recv, block, deadline);
      },
      deadline, "all-gather");
}

absl::Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                         ReduceOp op, absl::Time deadline) {
  LS_RETURN_IF_ERROR(CheckSendRecv("reduce-scatter", rank(), send, recv, count));
  return RunNow(
      [=] {
        const size_t block = count * DTypeSize(dtype);
        scratch_.resize(block * size());
        if (block > 0) std::memcpy(scratch_.data(), send, block * size());
        LS_RETURN_IF_ERROR(RingReduceScatter(*transport_, options_.chunk_bytes, scratch_.data(),
                                             count, dtype, op, deadline));
        if (block > 0) std::memcpy(recv, scratch_.data() + rank() * block, block);
        return absl::OkStatus();
      },
      deadline, "reduce-scatter");
}

absl::Status Communicator::Barrier(absl::Time deadline) {
  return RunNow([=] { return DisseminationBarrier(*transport_, deadline); }, deadline, "barrier");
}

}  // namespace collectives
}  // namespace lockstep

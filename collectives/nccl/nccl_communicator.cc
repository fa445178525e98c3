#include "collectives/nccl/nccl_communicator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/nccl_bootstrap.h"
#include "common/status.h"

namespace lockstep::collectives::nccl {

absl::Status NcclCommunicator::CheckOptions(NcclCommunicatorOptions& options) {
  if (options.store == nullptr || options.api == nullptr || options.clock == nullptr) {
    return absl::InvalidArgumentError("NcclCommunicator: store, api and clock are required");
  }
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("NcclCommunicator: rank ", options.rank,
                                                   " is outside a group of ", options.size));
  }
  if (options.signal == nullptr) options.signal = std::make_shared<AbortSignal>();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    NcclCommunicatorOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(std::move(options)));
  const NcclCommunicatorOptions& o = c->options_;
  absl::StatusOr<std::string> id =
      ExchangeUniqueId(*o.store, *o.api, o.rank, o.key, o.init_deadline);
  if (!id.ok()) return id.status();
  if (absl::Status s = c->StartInit(*id); !s.ok()) return s;
  if (absl::Status s = c->FinishInit(); !s.ok()) return s;
  return c;
}

NcclCommunicator::NcclCommunicator(NcclCommunicatorOptions options) : options_(std::move(options)) {
  listener_ = options_.signal->AddListener([this] { Wake(); });
}

NcclCommunicator::~NcclCommunicator() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  if (queue_thread_.joinable()) queue_thread_.join();
  options_.signal->RemoveListener(listener_);
  {
    absl::MutexLock pool(&pool_mu_);
    for (CudaEvent e : all_events_) options_.cuda->EventDestroy(e).IgnoreError();
  }
  absl::MutexLock lock(&mu_);
  if (done_ != nullptr) options_.cuda->EventDestroy(done_).IgnoreError();
  if (barrier_scratch_ != nullptr) options_.api->DeviceFree(barrier_scratch_);
  // A failed communicator was aborted (and freed) by Fail.
  if (comm_ != nullptr) options_.api->CommDestroy(comm_).IgnoreError();
}

absl::Status NcclCommunicator::StartInit(const std::string& id) {
  const std::string who = absl::StrCat("rank ", options_.rank, " of ", options_.size);
  if (options_.device >= 0) {
    if (absl::Status s = options_.api->SetDevice(options_.device); !s.ok()) {
      return Annotate(s, who);
    }
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<NcclComm> comm = options_.api->CommInitRank(options_.size, id, options_.rank);
  if (!comm.ok()) return Annotate(comm.status(), absl::StrCat(who, ": NCCL init"));
  comm_ = *comm;
  return absl::OkStatus();
}

absl::Status NcclCommunicator::FinishInit() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Wait("init", options_.init_deadline, /*stream=*/false); !s.ok()) return s;
  if (options_.device >= 0) {
    if (absl::Status s = options_.api->SetDevice(options_.device); !s.ok()) return Fail(s);
  }
  absl::StatusOr<void*> scratch = options_.api->DeviceAlloc(sizeof(int32_t));
  if (!scratch.ok()) {
    return Fail(
        Annotate(scratch.status(), absl::StrCat("rank ", options_.rank, ": barrier scratch")));
  }
  barrier_scratch_ = *scratch;
  if (options_.cuda != nullptr) {
    absl::Status s =
        options_.device >= 0 ? options_.cuda->SetDevice(options_.device) : absl::OkStatus();
    absl::StatusOr<CudaEvent> done = s.ok() ? options_.cuda->EventCreate() : s;
    if (!done.ok()) {
      return Fail(Annotate(done.status(), absl::StrCat("rank ", options_.rank, ": done event")));
    }
    done_ = *done;
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaEvent> NcclCommunicator::Capture() {
  if (options_.cuda == nullptr) return nullptr;
  CudaEvent e = nullptr;
  {
    absl::MutexLock lock(&pool_mu_);
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    }
  }
  const std::string who = absl::StrCat("rank ", options_.rank, ": NCCL ready event");
  if (e == nullptr) {  // the pool grows to the calls in flight, then stays
    if (options_.device >= 0) {
      if (absl::Status s = options_.cuda->SetDevice(options_.device); !s.ok()) {
        return Annotate(s, who);
      }
    }
    absl::StatusOr<CudaEvent> made = options_.cuda->EventCreate();
    if (!made.ok()) return Annotate(made.status(), who);
    e = *made;
    absl::MutexLock lock(&pool_mu_);
    all_events_.push_back(e);
  }
  if (absl::Status s = options_.cuda->EventRecord(e, options_.producer); !s.ok()) {
    absl::MutexLock lock(&pool_mu_);
    free_events_.push_back(e);
    return Annotate(s, who);
  }
  return e;
}

absl::Status NcclCommunicator::AfterProducer(CudaEvent ready) {
  if (ready == nullptr) return absl::OkStatus();
  // The wait holds the event's record as it is now: the event may be recorded again at once.
  absl::Status s = options_.wait_for_producer ? options_.cuda->StreamWaitEvent(
                                                    static_cast<CudaStream>(options_.stream), ready)
                                              : absl::OkStatus();
  absl::MutexLock lock(&pool_mu_);
  free_events_.push_back(ready);
  return s;
}

absl::Status NcclCommunicator::Fail(absl::Status status, const char* what) {
  // An NCCL error after the attempt heard of a lost peer (another rank aborted on that
  // notice) is the loss's consequence: report the cause, which names the lost rank.
  if (absl::Status cause = options_.signal->Check(options_.rank, what);
      !cause.ok() && absl::IsUnavailable(cause)) {
    status = cause;
  }
  if (failed_.ok()) failed_ = status;
  if (comm_ != nullptr) {
    options_.api->CommAbort(comm_).IgnoreError();  // the first error is the one to report
    comm_ = nullptr;
  }
  return status;
}

void NcclCommunicator::Wake() {
  absl::MutexLock lock(&wake_mu_);
  woken_ = true;
}

void NcclCommunicator::Doze(absl::Time until) {
  absl::MutexLock lock(&wake_mu_);
  options_.clock->WaitUntil(&wake_mu_, absl::Condition(&woken_), until);
}

absl::Status NcclCommunicator::Wait(const char* what, absl::Time deadline, bool stream) {
  const int rank = options_.rank;
  int spins = 0;
  absl::Duration doze = absl::Microseconds(1);
  while (true) {
    if (absl::Status s = Signalled(what); !s.ok()) return Fail(s, what);
    absl::StatusOr<NcclProgress> state = options_.api->AsyncState(comm_);
    if (!state.ok()) {
      return Fail(Annotate(state.status(), absl::StrCat("rank ", rank, ": NCCL ", what)), what);
    }
    if (*state == NcclProgress::kDone) {
      if (!stream) return absl::OkStatus();
      // This call's work (its done event), or without events the whole stream.
      absl::StatusOr<bool> done =
          options_.cuda != nullptr ? options_.cuda->EventQuery(done_) : StreamIdle();
      if (!done.ok()) {
        return Fail(Annotate(done.status(), absl::StrCat("rank ", rank, ": NCCL ", what)), what);
      }
      if (*done) return absl::OkStatus();
    }
    if (options_.clock->Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank, " of ", options_.size, ": NCCL ", what,
          " did not finish by its deadline (communication.timeout_ms): a peer is slow, stopped "
          "or never joined; the NCCL communicator was aborted")));
    }
    if (spins < kSpinPolls) {
      ++spins;
      std::this_thread::yield();
      continue;
    }
    Doze(std::min(options_.clock->Now() + doze, deadline));
    doze = std::min(doze * 2, options_.poll_interval);
  }
}

absl::Status NcclCommunicator::CheckBuffers(const char* what, const void* a, const void* b,
                                            size_t count) const {
  if (count > 0 && (a == nullptr || b == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options_.rank, ": NCCL ", what,
                                                   ": null buffer with ", count, " elements"));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::CheckBroadcast(const void* buf, size_t count, int root) const {
  if (root < 0 || root >= options_.size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options_.rank,
                                                   ": NCCL broadcast: root ", root,
                                                   " is outside a group of ", options_.size));
  }
  return CheckBuffers("broadcast", buf, buf, count);
}

absl::Status NcclCommunicator::StartLocked(const char* what,
                                           const std::function<absl::Status(NcclComm)>& enqueue) {
  if (!failed_.ok()) return failed_;
  if (absl::Status s = Signalled(what); !s.ok()) return Fail(s, what);
  if (absl::Status s = enqueue(comm_); !s.ok()) {
    return Fail(Annotate(s, absl::StrCat("rank ", options_.rank, ": NCCL ", what)), what);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> NcclCommunicator::StreamIdle() {
  absl::StatusOr<NcclProgress> state = options_.api->StreamState(options_.stream);
  if (!state.ok()) return state.status();
  return *state == NcclProgress::kDone;
}

absl::Status NcclCommunicator::Run(const char* what, absl::Time deadline,
                                   const std::function<absl::Status(NcclComm)>& enqueue,
                                   CudaEvent ready) {
  if (ready == nullptr) {
    absl::StatusOr<CudaEvent> captured = Capture();
    if (!captured.ok()) {
      absl::MutexLock lock(&mu_);
      return Fail(captured.status(), what);
    }
    ready = *captured;
  }
  absl::MutexLock lock(&mu_);
  bool waited = false;
  absl::Status started = StartLocked(what, [&](NcclComm comm) -> absl::Status {
    waited = true;
    if (absl::Status s = AfterProducer(ready); !s.ok()) return s;
    if (absl::Status s = enqueue(comm); !s.ok()) return s;
    if (done_ == nullptr) return absl::OkStatus();
    return options_.cuda->EventRecord(done_, static_cast<CudaStream>(options_.stream));
  });
  if (!waited && ready != nullptr) {  // refused before enqueueing: the event goes back
    absl::MutexLock pool(&pool_mu_);
    free_events_.push_back(ready);
  }
  if (!started.ok()) return started;
  if (absl::Status s = Wait(what, deadline, /*stream=*/true); !s.ok()) return s;
  if (done_ == nullptr) return absl::OkStatus();
  // The producer's next kernels (the optimizer's) read what this call wrote.
  if (absl::Status s = options_.cuda->StreamWaitEvent(options_.producer, done_); !s.ok()) {
    return Fail(Annotate(s, absl::StrCat("rank ", options_.rank, ": NCCL ", what)), what);
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::RunInOrder(std::function<absl::Status()> body) {
  bool now;
  {
    absl::MutexLock lock(&queue_mu_);
    now = queue_.empty() && !running_;
    if (now) running_ = true;
  }
  if (!now) return Submit(std::move(body), 0)->Wait();
  absl::Status s = body();
  absl::MutexLock lock(&queue_mu_);
  running_ = false;
  return s;
}

Handle NcclCommunicator::Submit(std::function<absl::Status()> body, size_t all_reduce_bytes) {
  auto handle = std::make_shared<CollectiveHandle>();
  absl::MutexLock lock(&queue_mu_);
  queue_.push_back({std::move(body), handle, all_reduce_bytes});
  if (!queue_thread_.joinable()) queue_thread_ = std::thread([this] { QueueLoop(); });
  return handle;
}

void NcclCommunicator::QueueLoop() {
  absl::MutexLock lock(&queue_mu_);
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return stopping_ || (!queue_.empty() && !running_);
    };
    queue_mu_.Await(absl::Condition(&ready));
    if (queue_.empty()) return;  // stopping, and every queued call has run
    if (running_) continue;
    Queued op = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    queue_mu_.Unlock();
    const absl::Time started = absl::Now();
    absl::Status s = op.body();
    if (s.ok() && op.all_reduce_bytes > 0) {
      all_reduce_bytes_ += static_cast<int64_t>(op.all_reduce_bytes);
      all_reduce_ns_ += absl::ToInt64Nanoseconds(absl::Now() - started);
    }
    op.handle->Finish(std::move(s));
    queue_mu_.Lock();
    running_ = false;
  }
}

CollectiveCommunicator::AllReduceTotals NcclCommunicator::async_all_reduce_totals() const {
  return {all_reduce_bytes_.load(), absl::Nanoseconds(all_reduce_ns_.load())};
}

absl::Status NcclCommunicator::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                         ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckBuffers("all-reduce", send, recv, count); !s.ok()) return s;
  return RunInOrder([&] {
    return Run("all-reduce", deadline, [&](NcclComm comm) {
      return options_.api->AllReduce(send, recv, count, dtype, op, comm, options_.stream);
    });
  });
}

Handle NcclCommunicator::AllReduceAsync(const void* send, void* recv, size_t count, DType dtype,
                                        ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckBuffers("all-reduce", send, recv, count); !s.ok()) {
    return CollectiveHandle::Finished(s);
  }
  absl::StatusOr<CudaEvent> ready = Capture();
  if (!ready.ok()) return CollectiveHandle::Finished(ready.status());
  return Submit(
      [=, this, ready = *ready] {
        return Run(
            "all-reduce", deadline,
            [&](NcclComm comm) {
              return options_.api->AllReduce(send, recv, count, dtype, op, comm, options_.stream);
            },
            ready);
      },
      std::max<size_t>(1, count * DTypeSize(dtype)));
}

absl::Status NcclCommunicator::CheckPieces(absl::Span<const BufferPiece> pieces,
                                           DType dtype) const {
  const size_t size = DTypeSize(dtype);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].bytes % size != 0 || (pieces[i].bytes > 0 && pieces[i].data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", options_.rank, ": NCCL all-reduce: piece ", i, " of ", pieces[i].bytes,
          " bytes is null or not a whole number of ", DTypeName(dtype), " elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::RunPieces(absl::Span<const BufferPiece> pieces, DType dtype,
                                         ReduceOp op, absl::Time deadline, CudaEvent ready) {
  const size_t size = DTypeSize(dtype);
  return Run(
      "all-reduce", deadline,
      [&](NcclComm comm) -> absl::Status {
        NcclApi& api = *options_.api;
        if (absl::Status s = api.GroupStart(); !s.ok()) return s;
        absl::Status first;
        for (const BufferPiece& p : pieces) {
          if (p.bytes == 0) continue;
          first.Update(
              api.AllReduce(p.data, p.data, p.bytes / size, dtype, op, comm, options_.stream));
        }
        first.Update(api.GroupEnd());
        return first;
      },
      ready);
}

Handle NcclCommunicator::AllReducePiecesAsync(absl::Span<const BufferPiece> pieces, DType dtype,
                                              ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckPieces(pieces, dtype); !s.ok()) return CollectiveHandle::Finished(s);
  size_t bytes = 0;
  for (const BufferPiece& p : pieces) bytes += p.bytes;
  // The producer's work so far wrote this pack: captured now, on the caller's thread.
  absl::StatusOr<CudaEvent> ready = Capture();
  if (!ready.ok()) return CollectiveHandle::Finished(ready.status());
  return Submit([=, this, ready = *ready] { return RunPieces(pieces, dtype, op, deadline, ready); },
                std::max<size_t>(1, bytes));
}

absl::Status NcclCommunicator::AllReducePieces(absl::Span<const BufferPiece> pieces, DType dtype,
                                               ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckPieces(pieces, dtype); !s.ok()) return s;
  size_t bytes = 0;
  for (const BufferPiece& p : pieces) bytes += p.bytes;
  return RunInOrder([&] {
    const absl::Time started = absl::Now();
    absl::Status s = RunPieces(pieces, dtype, op, deadline);
    if (s.ok()) {
      all_reduce_bytes_ += static_cast<int64_t>(bytes);
      all_reduce_ns_ += absl::ToInt64Nanoseconds(absl::Now() - started);
    }
    return s;
  });
}

absl::Status NcclCommunicator::Broadcast(void* buf, size_t count, DType dtype, int root,
                                         absl::Time deadline) {
  if (absl::Status s = CheckBroadcast(buf, count, root); !s.ok()) return s;
  return RunInOrder([&] {
    return Run("broadcast", deadline, [&](NcclComm comm) {
      return options_.api->Broadcast(buf, buf, count, dtype, root, comm, options_.stream);
    });
  });
}

Handle NcclCommunicator::BroadcastAsync(void* buf, size_t count, DType dtype, int root,
                                        absl::Time deadline) {
  if (absl::Status s = CheckBroadcast(buf, count, root); !s.ok()) {
    return CollectiveHandle::Finished(s);
  }
  absl::StatusOr<CudaEvent> ready = Capture();
  if (!ready.ok()) return CollectiveHandle::Finished(ready.status());
  return Submit(
      [=, this, ready = *ready] {
        return Run(
            "broadcast", deadline,
            [&](NcclComm comm) {
              return options_.api->Broadcast(buf, buf, count, dtype, root, comm, options_.stream);
            },
            ready);
      },
      0);
}

absl::Status NcclCommunicator::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                         absl::Time deadline) {
  if (absl::Status s = CheckBuffers("all-gather", send, recv, count); !s.ok()) return s;
  return RunInOrder([&] {
    return Run("all-gather", deadline, [&](NcclComm comm) {
      return options_.api->AllGather(send, recv, count, dtype, comm, options_.stream);
    });
  });
}

absl::Status NcclCommunicator::ReduceScatter(const void* send, void* recv, size_t count,
                                             DType dtype, ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckBuffers("reduce-scatter", send, recv, count); !s.ok()) return s;
  return RunInOrder([&] {
    return Run("reduce-scatter", deadline, [&](NcclComm comm) {
      return options_.api->ReduceScatter(send, recv, count, dtype, op, comm, options_.stream);
    });
  });
}

absl::Status NcclCommunicator::Barrier(absl::Time deadline) {
  return RunInOrder([&] {
    return Run("barrier", deadline, [&](NcclComm comm) {
      return options_.api->AllReduce(barrier_scratch_, barrier_scratch_, 1, DType::kI32,
                                     ReduceOp::kSum, comm, options_.stream);
    });
  });
}

void NcclCommunicator::Abort() {
  aborted_ = true;
  Wake();
}

absl::Status NcclCommunicator::Signalled(const char* what) const {
  if (aborted_) {
    return absl::AbortedError(
        absl::StrCat("rank ", options_.rank, ": NCCL ", what, " aborted (Abort())"));
  }
  return options_.signal->Check(options_.rank, what);
}

}  // namespace lockstep::collectives::nccl

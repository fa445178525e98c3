#include "collectives/nccl/nccl_communicator.h"

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

NcclCommunicator::NcclCommunicator(NcclCommunicatorOptions options)
    : options_(std::move(options)) {}

NcclCommunicator::~NcclCommunicator() {
  absl::MutexLock lock(&mu_);
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
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Fail(absl::Status status) {
  if (failed_.ok()) failed_ = status;
  if (comm_ != nullptr) {
    options_.api->CommAbort(comm_).IgnoreError();  // the first error is the one to report
    comm_ = nullptr;
  }
  return status;
}

absl::Status NcclCommunicator::Wait(const char* what, absl::Time deadline, bool stream) {
  const int rank = options_.rank;
  while (true) {
    if (absl::Status s = Signalled(what); !s.ok()) return Fail(s);
    absl::StatusOr<NcclProgress> state = options_.api->AsyncState(comm_);
    if (!state.ok()) {
      return Fail(Annotate(state.status(), absl::StrCat("rank ", rank, ": NCCL ", what)));
    }
    if (*state == NcclProgress::kDone) {
      if (!stream) return absl::OkStatus();
      absl::StatusOr<NcclProgress> done = options_.api->StreamState(options_.stream);
      if (!done.ok()) {
        return Fail(Annotate(done.status(), absl::StrCat("rank ", rank, ": NCCL ", what)));
      }
      if (*done == NcclProgress::kDone) return absl::OkStatus();
    }
    if (options_.clock->Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank, " of ", options_.size, ": NCCL ", what,
          " did not finish by its deadline (communication.timeout_ms): a peer is slow, stopped "
          "or never joined; the NCCL communicator was aborted")));
    }
    options_.clock->SleepFor(options_.poll_interval);
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

absl::Status NcclCommunicator::StartLocked(const char* what,
                                           const std::function<absl::Status(NcclComm)>& enqueue) {
  if (!failed_.ok()) return failed_;
  if (absl::Status s = Signalled(what); !s.ok()) return Fail(s);
  if (absl::Status s = enqueue(comm_); !s.ok()) {
    return Fail(Annotate(s, absl::StrCat("rank ", options_.rank, ": NCCL ", what)));
  }
  return absl::OkStatus();
}

template <typename F>
absl::Status NcclCommunicator::Run(const char* what, absl::Time deadline, F&& enqueue) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = StartLocked(what, enqueue); !s.ok()) return s;
  return Wait(what, deadline, /*stream=*/true);
}

absl::Status NcclCommunicator::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                         ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckBuffers("all-reduce", send, recv, count); !s.ok()) return s;
  return Run("all-reduce", deadline, [&](NcclComm comm) {
    return options_.api->AllReduce(send, recv, count, dtype, op, comm, options_.stream);
  });
}

absl::Status NcclCommunicator::Broadcast(void* buf, size_t count, DType dtype, int root,
                                         absl::Time deadline) {
  if (root < 0 || root >= options_.size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options_.rank,
                                                   ": NCCL broadcast: root ", root,
                                                   " is outside a group of ", options_.size));
  }
  if (absl::Status s = CheckBuffers("broadcast", buf, buf, count); !s.ok()) return s;
  return Run("broadcast", deadline, [&](NcclComm comm) {
    return options_.api->Broadcast(buf, buf, count, dtype, root, comm, options_.stream);
  });
}

absl::Status NcclCommunicator::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                         absl::Time deadline) {
  if (absl::Status s = CheckBuffers("all-gather", send, recv, count); !s.ok()) return s;
  return Run("all-gather", deadline, [&](NcclComm comm) {
    return options_.api->AllGather(send, recv, count, dtype, comm, options_.stream);
  });
}

absl::Status NcclCommunicator::ReduceScatter(const void* send, void* recv, size_t count,
                                             DType dtype, ReduceOp op, absl::Time deadline) {
  if (absl::Status s = CheckBuffers("reduce-scatter", send, recv, count); !s.ok()) return s;
  return Run("reduce-scatter", deadline, [&](NcclComm comm) {
    return options_.api->ReduceScatter(send, recv, count, dtype, op, comm, options_.stream);
  });
}

absl::Status NcclCommunicator::Barrier(absl::Time deadline) {
  return Run("barrier", deadline, [&](NcclComm comm) {
    return options_.api->AllReduce(barrier_scratch_, barrier_scratch_, 1, DType::kI32,
                                   ReduceOp::kSum, comm, options_.stream);
  });
}

void NcclCommunicator::Abort() { aborted_ = true; }

absl::Status NcclCommunicator::Signalled(const char* what) const {
  if (aborted_) {
    return absl::AbortedError(
        absl::StrCat("rank ", options_.rank, ": NCCL ", what, " aborted (Abort())"));
  }
  return options_.signal->Check(options_.rank, what);
}

}  // namespace lockstep::collectives::nccl

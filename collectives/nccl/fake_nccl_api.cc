#include "collectives/nccl/fake_nccl_api.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::collectives::nccl {

FakeNcclApi::FakeNcclApi(FakeNcclWorld* world)
    : own_world_(world == nullptr ? std::make_unique<FakeNcclWorld>() : nullptr),
      world_(world == nullptr ? own_world_.get() : world) {}

void FakeNcclApi::set_init_polls(int polls) {
  absl::MutexLock lock(&mu_);
  init_polls_ = polls;
}

void FakeNcclApi::set_op_polls(int polls) {
  absl::MutexLock lock(&mu_);
  op_polls_ = polls;
}

void FakeNcclApi::InjectAsyncError(absl::Status error) {
  absl::MutexLock lock(&mu_);
  async_error_ = std::move(error);
}

int FakeNcclApi::aborts() const {
  absl::MutexLock lock(&mu_);
  return aborts_;
}

int FakeNcclApi::destroys() const {
  absl::MutexLock lock(&mu_);
  return destroys_;
}

std::vector<std::string> FakeNcclApi::init_ids() const {
  absl::MutexLock lock(&mu_);
  return init_ids_;
}

std::vector<std::string> FakeNcclApi::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

bool FakeNcclApi::WaitForCalls(size_t n, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.size() >= n; };
  return mu_.AwaitWithDeadline(absl::Condition(&enough), deadline);
}

absl::StatusOr<std::string> FakeNcclApi::GetUniqueId() { return world_->NewUniqueId(); }

absl::StatusOr<NcclComm> FakeNcclApi::CommInitRank(int nranks, absl::string_view unique_id,
                                                   int rank) {
  absl::StatusOr<NcclComm> comm = world_->Join(unique_id, nranks, rank);
  absl::MutexLock lock(&mu_);
  init_ids_.emplace_back(unique_id);
  if (comm.ok()) polls_left_[*comm] = init_polls_;
  return comm;
}

absl::StatusOr<NcclProgress> FakeNcclApi::AsyncState(NcclComm comm) {
  {
    absl::MutexLock lock(&mu_);
    if (!async_error_.ok()) return async_error_;
  }
  absl::StatusOr<NcclProgress> progress = world_->Progress(comm);
  if (!progress.ok() || *progress == NcclProgress::kInProgress) return progress;
  absl::MutexLock lock(&mu_);
  int& left = polls_left_[comm];
  if (left == 0) return NcclProgress::kDone;
  if (left > 0) --left;
  return NcclProgress::kInProgress;
}

absl::Status FakeNcclApi::CommAbort(NcclComm comm) {
  {
    absl::MutexLock lock(&mu_);
    ++aborts_;
    polls_left_.erase(comm);
  }
  return world_->Abort(comm);
}

absl::Status FakeNcclApi::CommDestroy(NcclComm comm) {
  {
    absl::MutexLock lock(&mu_);
    ++destroys_;
    polls_left_.erase(comm);
  }
  return world_->Destroy(comm);
}

std::vector<DeviceStream> FakeNcclApi::collective_streams() const {
  absl::MutexLock lock(&mu_);
  return collective_streams_;
}

absl::Status FakeNcclApi::Enqueue(NcclComm comm, const FakeNcclCall& call, DeviceStream stream) {
  absl::StatusOr<FakeNcclRank> who = world_->RankOf(comm);
  absl::Status checked = who.ok() ? world_->Check(comm, call) : who.status();
  {
    absl::MutexLock lock(&mu_);
    collective_streams_.push_back(stream);
    calls_.push_back(who.ok()
                         ? absl::StrCat(call.Describe(), " rank ", who->rank, " of ", who->nranks)
                         : absl::StrCat(call.Describe(), " on a freed communicator"));
    if (!checked.ok()) return checked;
    polls_left_[comm] = op_polls_;
    OpenGroup& group = groups_[std::this_thread::get_id()];
    if (group.depth > 0) {
      group.held.emplace_back(comm, call);
      return absl::OkStatus();
    }
  }
  return world_->Submit(comm, call);
}

absl::Status FakeNcclApi::RunStreamBefore(const void* buffer, DeviceStream stream) {
  FakeCudaApi* cuda = world_->DeviceMemoryOf(buffer);
  if (cuda == nullptr || stream == nullptr) return absl::OkStatus();
  return cuda->StreamSynchronize(static_cast<CudaStream>(stream));
}

absl::Status FakeNcclApi::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                    ReduceOp op, NcclComm comm, DeviceStream stream) {
  LS_RETURN_IF_ERROR(RunStreamBefore(send, stream));
  return Enqueue(comm, {FakeNcclCall::Kind::kAllReduce, send, recv, count, dtype, op}, stream);
}

absl::Status FakeNcclApi::Broadcast(const void* send, void* recv, size_t count, DType dtype,
                                    int root, NcclComm comm, DeviceStream stream) {
  LS_RETURN_IF_ERROR(RunStreamBefore(send, stream));
  return Enqueue(comm,
                 {FakeNcclCall::Kind::kBroadcast, send, recv, count, dtype, ReduceOp::kSum, root},
                 stream);
}

absl::Status FakeNcclApi::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                    NcclComm comm, DeviceStream stream) {
  LS_RETURN_IF_ERROR(RunStreamBefore(send, stream));
  return Enqueue(comm, {FakeNcclCall::Kind::kAllGather, send, recv, count, dtype}, stream);
}

absl::Status FakeNcclApi::ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                        ReduceOp op, NcclComm comm, DeviceStream stream) {
  LS_RETURN_IF_ERROR(RunStreamBefore(send, stream));
  return Enqueue(comm, {FakeNcclCall::Kind::kReduceScatter, send, recv, count, dtype, op}, stream);
}

absl::Status FakeNcclApi::GroupStart() {
  absl::MutexLock lock(&mu_);
  calls_.push_back("group-start");
  ++groups_[std::this_thread::get_id()].depth;
  return absl::OkStatus();
}

absl::Status FakeNcclApi::GroupEnd() {
  std::vector<std::pair<NcclComm, FakeNcclCall>> held;
  {
    absl::MutexLock lock(&mu_);
    calls_.push_back("group-end");
    auto it = groups_.find(std::this_thread::get_id());
    if (it == groups_.end() || it->second.depth == 0) {
      return absl::InvalidArgumentError(
          "fake ncclGroupEnd without ncclGroupStart on this thread (ncclInvalidUsage)");
    }
    if (--it->second.depth > 0) return absl::OkStatus();
    held = std::move(it->second.held);
    groups_.erase(it);
  }
  absl::Status status;
  for (const auto& [comm, call] : held) {
    if (absl::Status s = world_->Submit(comm, call); status.ok()) status = s;
  }
  return status;
}

absl::Status FakeNcclApi::SetDevice(int device) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat("device ", device));
  return absl::OkStatus();
}

absl::StatusOr<NcclProgress> FakeNcclApi::StreamState(DeviceStream stream) {
  return NcclProgress::kDone;  // the fake's work is done when the communicator is idle
}

absl::StatusOr<void*> FakeNcclApi::DeviceAlloc(size_t bytes) { return std::calloc(1, bytes); }

void FakeNcclApi::DeviceFree(void* p) { std::free(p); }

}  // namespace lockstep::collectives::nccl

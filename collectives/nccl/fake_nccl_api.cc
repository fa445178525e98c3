#include "collectives/nccl/fake_nccl_api.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep::collectives::nccl {

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

void FakeNcclApi::WaitForCalls(size_t n) const {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.size() >= n; };
  mu_.Await(absl::Condition(&enough));
}

absl::StatusOr<std::string> FakeNcclApi::GetUniqueId() {
  absl::MutexLock lock(&mu_);
  std::string id(kNcclUniqueIdBytes, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 7 + ids_) & 0xff);
  ++ids_;
  return id;
}

absl::StatusOr<NcclComm> FakeNcclApi::CommInitRank(int nranks, absl::string_view unique_id,
                                                   int rank) {
  absl::MutexLock lock(&mu_);
  init_ids_.emplace_back(unique_id);
  in_progress_ = init_polls_;
  return static_cast<NcclComm>(&comms_[next_comm_++ % 8]);
}

absl::StatusOr<NcclProgress> FakeNcclApi::AsyncState(NcclComm comm) {
  absl::MutexLock lock(&mu_);
  if (!async_error_.ok()) return async_error_;
  if (in_progress_ == 0) return NcclProgress::kDone;
  if (in_progress_ > 0) --in_progress_;
  return NcclProgress::kInProgress;
}

absl::Status FakeNcclApi::CommAbort(NcclComm comm) {
  absl::MutexLock lock(&mu_);
  ++aborts_;
  return absl::OkStatus();
}

absl::Status FakeNcclApi::CommDestroy(NcclComm comm) {
  absl::MutexLock lock(&mu_);
  ++destroys_;
  return absl::OkStatus();
}

absl::Status FakeNcclApi::Enqueue(const char* what, DType dtype, const void* send, void* recv,
                                  size_t bytes) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(absl::StrCat(what, " ", DTypeName(dtype)));
  if (bytes > 0 && send != recv) std::memmove(recv, send, bytes);
  in_progress_ = op_polls_;
  return absl::OkStatus();
}

absl::Status FakeNcclApi::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                    ReduceOp op, NcclComm comm, DeviceStream stream) {
  return Enqueue("all-reduce", dtype, send, recv, count * DTypeSize(dtype));
}

absl::Status FakeNcclApi::Broadcast(const void* send, void* recv, size_t count, DType dtype,
                                    int root, NcclComm comm, DeviceStream stream) {
  return Enqueue("broadcast", dtype, send, recv, count * DTypeSize(dtype));
}

absl::Status FakeNcclApi::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                    NcclComm comm, DeviceStream stream) {
  return Enqueue("all-gather", dtype, send, recv, count * DTypeSize(dtype));
}

absl::Status FakeNcclApi::ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                        ReduceOp op, NcclComm comm, DeviceStream stream) {
  return Enqueue("reduce-scatter", dtype, send, recv, count * DTypeSize(dtype));
}

absl::Status FakeNcclApi::GroupStart() {
  absl::MutexLock lock(&mu_);
  calls_.push_back("group-start");
  return absl::OkStatus();
}

absl::Status FakeNcclApi::GroupEnd() {
  absl::MutexLock lock(&mu_);
  calls_.push_back("group-end");
  return absl::OkStatus();
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

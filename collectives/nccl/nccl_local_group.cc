#include "collectives/nccl/nccl_local_group.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/nccl_bootstrap.h"

namespace lockstep::collectives::nccl {

absl::StatusOr<std::unique_ptr<NcclLocalGroup>> NcclLocalGroup::Create(
    NcclCommunicatorOptions common, std::vector<LocalGpu> gpus) {
  if (gpus.empty()) return absl::InvalidArgumentError("NcclLocalGroup: no GPU");
  std::set<int> ranks;
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  if (common.signal == nullptr) common.signal = std::make_shared<AbortSignal>();
  for (const LocalGpu& g : gpus) {
    if (!ranks.insert(g.rank).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("NcclLocalGroup: rank ", g.rank, " is given to two GPUs"));
    }
    NcclCommunicatorOptions o = common;
    o.rank = g.rank;
    o.device = g.device;
    o.stream = g.stream;
    if (absl::Status s = NcclCommunicator::CheckOptions(o); !s.ok()) return s;
    comms.push_back(std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(o))));
  }
  // The worker holding rank 0 publishes the id; every other worker reads it once.
  absl::StatusOr<std::string> id = ExchangeUniqueId(*common.store, *common.api, *ranks.begin(),
                                                    common.key, common.init_deadline);
  if (!id.ok()) return id.status();
  std::unique_ptr<NcclLocalGroup> group(new NcclLocalGroup(std::move(comms)));
  if (absl::Status s = common.api->GroupStart(); !s.ok()) return s;
  absl::Status started;
  for (auto& c : group->comms_) {
    started = c->StartInit(*id);
    if (!started.ok()) break;
  }
  if (absl::Status s = common.api->GroupEnd(); started.ok() && !s.ok()) started = s;
  if (!started.ok()) return group->FailAll(started);
  for (auto& c : group->comms_) {
    if (absl::Status s = c->FinishInit(); !s.ok()) return group->FailAll(s);
  }
  return group;
}

absl::Status NcclLocalGroup::RunGroup(const char* what, absl::Time deadline,
                                      const std::function<absl::Status(size_t, NcclComm)>& enqueue)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  absl::MutexLock group_lock(&mu_);
  std::vector<std::unique_ptr<absl::MutexLock>> locks;
  for (auto& c : comms_) locks.push_back(std::make_unique<absl::MutexLock>(&c->mu_));
  NcclApi& api = *comms_[0]->options_.api;
  absl::Status status = api.GroupStart();
  for (size_t i = 0; status.ok() && i < comms_.size(); ++i) {
    status = comms_[i]->StartLocked(what, [&](NcclComm comm) { return enqueue(i, comm); });
  }
  if (absl::Status s = api.GroupEnd(); status.ok() && !s.ok()) status = s;
  for (size_t i = 0; status.ok() && i < comms_.size(); ++i) {
    status = comms_[i]->Wait(what, deadline, /*stream=*/true);
  }
  if (!status.ok()) {
    // Every member fails with the first error (Fail keeps a member's own earlier one).
    for (auto& c : comms_) c->Fail(status).IgnoreError();
  }
  return status;
}

absl::Status NcclLocalGroup::AllReduce(absl::Span<const void* const> send,
                                       absl::Span<void* const> recv, size_t count, DType dtype,
                                       ReduceOp op, absl::Time deadline) {
  if (send.size() != comms_.size() || recv.size() != comms_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL group all-reduce: ", send.size(),
                                                   " send and ", recv.size(), " recv buffers for ",
                                                   comms_.size(), " GPUs"));
  }
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (absl::Status s = comms_[i]->CheckBuffers("all-reduce", send[i], recv[i], count); !s.ok()) {
      return s;
    }
  }
  return RunGroup("all-reduce", deadline, [&](size_t i, NcclComm comm) {
    const NcclCommunicatorOptions& o = comms_[i]->options_;
    return o.api->AllReduce(send[i], recv[i], count, dtype, op, comm, o.stream);
  });
}

absl::Status NcclLocalGroup::Broadcast(absl::Span<void* const> bufs, size_t count, DType dtype,
                                       int root, absl::Time deadline) {
  const int size = comms_[0]->size();
  if (bufs.size() != comms_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL group broadcast: ", bufs.size(),
                                                   " buffers for ", comms_.size(), " GPUs"));
  }
  if (root < 0 || root >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL group broadcast: root ", root, " is outside a group of ", size));
  }
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (absl::Status s = comms_[i]->CheckBuffers("broadcast", bufs[i], bufs[i], count); !s.ok()) {
      return s;
    }
  }
  return RunGroup("broadcast", deadline, [&](size_t i, NcclComm comm) {
    const NcclCommunicatorOptions& o = comms_[i]->options_;
    return o.api->Broadcast(bufs[i], bufs[i], count, dtype, root, comm, o.stream);
  });
}

absl::Status NcclLocalGroup::FailAll(absl::Status status) {
  for (auto& c : comms_) {
    absl::MutexLock lock(&c->mu_);
    c->Fail(status).IgnoreError();
  }
  return status;
}

void NcclLocalGroup::Abort() {
  for (auto& c : comms_) c->Abort();
}

}  // namespace lockstep::collectives::nccl

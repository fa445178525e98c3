#include "collectives/nccl/fake_nccl_world.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/reduce.h"

namespace lockstep::collectives::nccl {
namespace {

const char* KindName(FakeNcclCall::Kind kind) {
  switch (kind) {
    case FakeNcclCall::Kind::kAllReduce:
      return "all-reduce";
    case FakeNcclCall::Kind::kBroadcast:
      return "broadcast";
    case FakeNcclCall::Kind::kAllGather:
      return "all-gather";
    case FakeNcclCall::Kind::kReduceScatter:
      return "reduce-scatter";
  }
  return "?";
}

// Whether two ranks' calls of one collective agree (buffers aside).
bool Agree(const FakeNcclCall& a, const FakeNcclCall& b) {
  return a.kind == b.kind && a.count == b.count && a.dtype == b.dtype &&
         (!a.reduces() || a.op == b.op) && a.root == b.root;
}

// The reduction of `block` (count elements starting at element count * block) of every
// rank's send buffer, in rank order.
std::vector<char> ReduceBlock(const std::vector<std::optional<FakeNcclCall>>& calls, size_t block) {
  const FakeNcclCall& c = *calls[0];
  const size_t bytes = c.count * DTypeSize(c.dtype);
  std::vector<char> acc(bytes);
  if (bytes == 0) return acc;
  std::memcpy(acc.data(), static_cast<const char*>(c.send) + block * bytes, bytes);
  for (size_t r = 1; r < calls.size(); ++r) {
    Reduce(c.dtype, c.op, acc.data(), static_cast<const char*>(calls[r]->send) + block * bytes,
           c.count);
  }
  FinishMean(c.dtype, c.op, acc.data(), c.count, static_cast<int>(calls.size()));
  return acc;
}

}  // namespace

std::string FakeNcclCall::Describe() const {
  std::string s = absl::StrCat(KindName(kind), " ", DTypeName(dtype));
  if (reduces()) absl::StrAppend(&s, " ", ReduceOpName(op));
  if (kind == Kind::kBroadcast) absl::StrAppend(&s, " root ", root);
  absl::StrAppend(&s, " count ", count);
  return s;
}

FakeNcclWorld::FakeNcclWorld() = default;
FakeNcclWorld::~FakeNcclWorld() = default;

std::string FakeNcclWorld::NewUniqueId() {
  absl::MutexLock lock(&mu_);
  std::string id(kNcclUniqueIdBytes, '\0');
  const uint64_t n = ids_++;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>((i * 7 + 1) & 0xff);
  std::memcpy(id.data(), &n, sizeof(n));
  return id;
}

absl::StatusOr<NcclComm> FakeNcclWorld::Join(absl::string_view unique_id, int nranks, int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return absl::InvalidArgumentError(absl::StrCat("fake ncclCommInitRank: rank ", rank,
                                                   " is outside a group of ", nranks,
                                                   " (ncclInvalidArgument)"));
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Group>& g = groups_[std::string(unique_id)];
  if (g == nullptr) {
    g = std::make_unique<Group>();
    g->nranks = nranks;
    g->taken.assign(nranks, false);
  }
  if (g->nranks != nranks) {
    return absl::InvalidArgumentError(absl::StrCat("fake ncclCommInitRank: rank ", rank,
                                                   " joins with nranks ", nranks,
                                                   ", its group has ", g->nranks));
  }
  if (g->taken[rank]) {
    return absl::InvalidArgumentError(
        absl::StrCat("fake ncclCommInitRank: rank ", rank, " of ", nranks, " joined twice"));
  }
  g->taken[rank] = true;
  ++g->joined;
  auto m = std::make_unique<Member>();
  m->group = g.get();
  m->rank = rank;
  members_.push_back(std::move(m));
  return static_cast<NcclComm>(members_.back().get());
}

absl::StatusOr<FakeNcclWorld::Member*> FakeNcclWorld::Find(NcclComm comm) const {
  for (const std::unique_ptr<Member>& m : members_) {
    if (m.get() == comm) {
      if (m->live) return m.get();
      break;
    }
  }
  return absl::InvalidArgumentError(
      "fake NCCL: the handle is not a live communicator (freed by ncclCommAbort or "
      "ncclCommDestroy, or never created)");
}

absl::StatusOr<FakeNcclRank> FakeNcclWorld::RankOf(NcclComm comm) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(comm);
  if (!m.ok()) return m.status();
  return FakeNcclRank{(*m)->rank, (*m)->group->nranks};
}

absl::Status FakeNcclWorld::Check(NcclComm comm, const FakeNcclCall& call) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(comm);
  if (!m.ok()) return m.status();
  const Group& g = *(*m)->group;
  const std::string who =
      absl::StrCat("fake NCCL ", call.Describe(), " on rank ", (*m)->rank, " of ", g.nranks);
  if (call.kind == FakeNcclCall::Kind::kBroadcast && (call.root < 0 || call.root >= g.nranks)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": root ", call.root, " is outside the group (ncclInvalidArgument)"));
  }
  if (call.count > 0 && (call.send == nullptr || call.recv == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": null buffer (ncclInvalidArgument)"));
  }
  return g.failed;
}

void FakeNcclWorld::UseDeviceMemory(FakeCudaApi* cuda) {
  absl::MutexLock lock(&mu_);
  cuda_.push_back(cuda);
}

FakeCudaApi* FakeNcclWorld::DeviceMemoryOf(const void* device_ptr) const {
  absl::ReaderMutexLock lock(&mu_);
  for (FakeCudaApi* c : cuda_) {
    if (c->HostView(device_ptr) != nullptr) return c;
  }
  return nullptr;
}

absl::Status FakeNcclWorld::Submit(NcclComm comm, const FakeNcclCall& issued) {
  if (absl::Status s = Check(comm, issued); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  FakeNcclCall call = issued;
  // Device buffers are computed on through their fake's read-write view.
  for (FakeCudaApi* c : cuda_) {
    if (void* view = c->HostView(call.send)) call.send = view;
    if (void* view = c->HostView(call.recv)) call.recv = view;
  }
  absl::StatusOr<Member*> found = Find(comm);  // may have been freed since Check
  if (!found.ok()) return found.status();
  Member& m = **found;
  Group& g = *m.group;
  if (!g.failed.ok()) return g.failed;
  const size_t index = m.issued++;
  Round& round = g.rounds[index];
  if (round.calls.empty()) round.calls.resize(g.nranks);
  round.calls[m.rank] = call;
  if (++round.issued == g.nranks) {
    Complete(g, index, round);
    g.rounds.erase(index);
  }
  return absl::OkStatus();
}

void FakeNcclWorld::Complete(Group& g, size_t index, const Round& round) {
  const std::vector<std::optional<FakeNcclCall>>& calls = round.calls;
  const FakeNcclCall& first = *calls[0];
  for (int r = 1; r < g.nranks; ++r) {
    if (Agree(first, *calls[r])) continue;
    std::vector<std::string> asked;
    for (int k = 0; k < g.nranks; ++k) {
      asked.push_back(absl::StrCat("rank ", k, ": ", calls[k]->Describe()));
    }
    if (g.failed.ok()) {
      g.failed = absl::InvalidArgumentError(
          absl::StrCat("fake NCCL: the ranks disagree on collective #", index, " of their group (",
                       absl::StrJoin(asked, "; "), ")"));
    }
    g.completed = index + 1;
    return;
  }
  const size_t bytes = first.count * DTypeSize(first.dtype);
  const int n = g.nranks;
  // Every result is computed before any recv buffer is written: NCCL allows recv == send.
  std::vector<std::vector<char>> out(n);
  switch (first.kind) {
    case FakeNcclCall::Kind::kAllReduce:
      out.assign(n, ReduceBlock(calls, 0));
      break;
    case FakeNcclCall::Kind::kBroadcast: {
      const char* src = static_cast<const char*>(calls[first.root]->send);
      out.assign(n, std::vector<char>(src, src + bytes));
      break;
    }
    case FakeNcclCall::Kind::kAllGather: {
      std::vector<char> all(bytes * n);
      for (int r = 0; r < n; ++r) {
        if (bytes > 0) std::memcpy(all.data() + r * bytes, calls[r]->send, bytes);
      }
      out.assign(n, all);
      break;
    }
    case FakeNcclCall::Kind::kReduceScatter:
      for (int r = 0; r < n; ++r) out[r] = ReduceBlock(calls, r);
      break;
  }
  for (int r = 0; r < n; ++r) {
    if (!out[r].empty()) std::memcpy(calls[r]->recv, out[r].data(), out[r].size());
  }
  g.completed = index + 1;
}

absl::StatusOr<NcclProgress> FakeNcclWorld::Progress(NcclComm comm) const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(comm);
  if (!m.ok()) return m.status();
  const Group& g = *(*m)->group;
  if (!g.failed.ok()) return g.failed;
  if (g.joined < g.nranks || g.completed < (*m)->issued) return NcclProgress::kInProgress;
  return NcclProgress::kDone;
}

absl::Status FakeNcclWorld::Abort(NcclComm comm) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(comm);
  if (!m.ok()) return m.status();
  (*m)->live = false;
  Group& g = *(*m)->group;
  if (g.failed.ok()) {
    g.failed = absl::UnavailableError(
        absl::StrCat("fake NCCL: rank ", (*m)->rank, " of ", g.nranks,
                     " aborted its communicator (ncclCommAbort): ncclRemoteError"));
  }
  return absl::OkStatus();
}

absl::Status FakeNcclWorld::Destroy(NcclComm comm) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Member*> m = Find(comm);
  if (!m.ok()) return m.status();
  (*m)->live = false;
  return absl::OkStatus();
}

}  // namespace lockstep::collectives::nccl

// ShmTransport's connect phases, named as NCCL's transports name theirs (shm_transport.h):
// CanConnect, Setup, ConnectPeers and AgreeOnPaths, run in that order by Connect(), and Free,
// run by the destructor. Each phase leaves the transport in a state the destructor can undo:
// a failure anywhere unmaps what was mapped and unlinks this rank's segment.
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "collectives/transport/shm/shm_layout.h"
#include "collectives/transport/shm/shm_negotiation.h"
#include "collectives/transport/shm/shm_segment.h"
#include "collectives/transport/shm/shm_transport.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace collectives {

using shm::kAlign;
using shm::kBounceBytes;
using shm::kHeaderBytes;
using shm::kShmMagic;

absl::StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Connect(int rank, int world_size,
                                                                    const std::string& key_prefix,
                                                                    Store* store,
                                                                    const ShmOptions& options,
                                                                    absl::Time deadline) {
  LS_RETURN_IF_ERROR(CanConnect(options));
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, world_size, options));
  if (world_size == 1) return t;
  LS_RETURN_IF_ERROR(t->Setup(key_prefix, store));
  LS_RETURN_IF_ERROR(t->ConnectPeers(key_prefix, store, deadline));
  LS_RETURN_IF_ERROR(t->AgreeOnPaths(key_prefix, store, deadline));
  return t;
}

absl::Status ShmTransport::CanConnect(const ShmOptions& options) {
  if (options.ring_bytes == 0 || options.ring_bytes % kAlign != 0) {
    return absl::InvalidArgumentError("shm ring_bytes must be a positive multiple of 64");
  }
  if (options.heap_bytes > 0 && options.cma_threshold_bytes > 0) {
    return absl::InvalidArgumentError(
        "shm heap_bytes and cma_threshold_bytes are two ways to single copy (in place through "
        "the heap, or process_vm_readv); set one of them");
  }
  return absl::OkStatus();
}

absl::Status ShmTransport::Setup(const std::string& key_prefix, Store* store) {
  own_name_ = shm::NewSegmentName(key_prefix, rank_);
  absl::StatusOr<void*> mapped = shm::CreateSegment(own_name_, segment_bytes_, rank_);
  if (!mapped.ok() && absl::IsResourceExhausted(mapped.status()) && options_.heap_bytes > 0 &&
      !options_.heap_required) {
    spdlog::warn(
        "collectives: rank {} ({}): no zero-copy heap, so shared-memory messages take a copy "
        "more: {}",
        rank_, key_prefix, std::string(mapped.status().message()));
    segment_bytes_ = kHeaderBytes + slot_bytes_ * size_;
    mapped = shm::CreateSegment(own_name_, segment_bytes_, rank_);
  }
  LS_RETURN_IF_ERROR(mapped.status());
  void* const own = *mapped;
  const size_t heap_bytes = segment_bytes_ > heap_offset_ ? segment_bytes_ - heap_offset_ : 0;
  own_ = std::make_shared<shm::OwnSegment>(own, segment_bytes_, heap_offset_, heap_bytes);
  segments_[rank_] = {own, segment_bytes_, static_cast<char*>(own) + heap_offset_, heap_bytes};
  Header* h = header(rank_);
  h->pid = getpid();
  h->rank = rank_;
  h->self_address = reinterpret_cast<uint64_t>(h);
  h->heap_offset = heap_bytes > 0 ? heap_offset_ : 0;
  h->heap_bytes = heap_bytes;
  h->pid_ns = shm::PidNamespace();
  h->failed_rank.store(-1, std::memory_order_relaxed);
  h->magic.store(kShmMagic, std::memory_order_release);
  return store->Set(absl::StrCat(key_prefix, "/shm/", rank_),
                    absl::StrCat(own_name_, " ", segment_bytes_));
}

absl::Status ShmTransport::ConnectPeers(const std::string& key_prefix, Store* store,
                                        absl::Time deadline) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    LS_ASSIGN_OR_RETURN(std::string value,
                        store->Get(absl::StrCat(key_prefix, "/shm/", r), deadline));
    LS_ASSIGN_OR_RETURN(const SegmentAdvert advert, ParseSegmentAdvert(value, r, kHeaderBytes));
    const size_t bytes = advert.bytes;
    LS_ASSIGN_OR_RETURN(void* p, shm::MapPeerSegment(advert.name, bytes));
    segments_[r] = {p, bytes};
    const Header* peer = header(r);
    if (peer->magic.load(std::memory_order_acquire) != kShmMagic || peer->rank != r ||
        peer->heap_offset > bytes || peer->heap_bytes > bytes - peer->heap_offset) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm segment ", advert.name, " of rank ", r,
                       " is not a Lockstep segment of the "
                       "same group layout; do all ranks use the same options?"));
    }
    segments_[r].heap = static_cast<const char*>(p) + peer->heap_offset;
    segments_[r].heap_bytes = peer->heap_bytes;
    peer_processes_[r] =
        shm::PeerProcessWatch::Start(rank_, r, peer->pid, header(rank_)->pid_ns, peer->pid_ns);
  }
  return absl::OkStatus();
}

absl::Status ShmTransport::AgreeOnPaths(const std::string& key_prefix, Store* store,
                                        absl::Time deadline) {
  // Single copy only if every rank can read every other's memory and all use the same
  // threshold (both ends of a message must agree on how it travels): each reports its own.
  // Likewise the heap path: every rank has a heap and frames the same messages.
  bool cma = options_.cma_threshold_bytes > 0;
  for (int r = 0; r < size_ && cma; ++r) cma = r == rank_ || ProbeCma(r);
  bool direct = segments_[rank_].heap_bytes > 0;
  const std::string mine =
      absl::StrCat("cma=", cma ? options_.cma_threshold_bytes : 0,
                   ";direct=", direct ? absl::StrCat(options_.direct_threshold_bytes) : "off");
  // Unlink once everyone has mapped everything: nothing is left behind in /dev/shm.
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/shm_mapped/", rank_), mine));
  for (int r = 0; r < size_; ++r) {
    LS_ASSIGN_OR_RETURN(std::string theirs,
                        store->Get(absl::StrCat(key_prefix, "/shm_mapped/", r), deadline));
    cma = cma && CapabilityField(theirs, "cma") == CapabilityField(mine, "cma");
    direct = direct && CapabilityField(theirs, "direct") == CapabilityField(mine, "direct");
  }
  cma_ = cma;
  direct_ = direct;
  if (cma) bounce_.resize(kBounceBytes);
  shm_unlink(own_name_.c_str());
  own_unlinked_ = true;
  return absl::OkStatus();
}

void ShmTransport::Free() {
  for (int r = 0; r < size_; ++r) {  // own_ unmaps this rank's own
    if (r != rank_ && segments_[r].base != nullptr) munmap(segments_[r].base, segments_[r].bytes);
  }
  if (!own_name_.empty() && !own_unlinked_) shm_unlink(own_name_.c_str());
}

bool ShmTransport::ProbeCma(int peer) const {
  const Header* h = header(peer);
  uint64_t magic = 0;
  iovec local{&magic, sizeof(magic)};
  iovec remote{reinterpret_cast<void*>(h->self_address), sizeof(magic)};
  // EPERM (ptrace rules, other uid), ENOSYS (seccomp) or EFAULT: fall back to the rings.
  return process_vm_readv(h->pid, &local, 1, &remote, 1, 0) == sizeof(magic) && magic == kShmMagic;
}

}  // namespace collectives
}  // namespace lockstep

// ShmTransport's data path: the rings and the small-message slots, the doorbell, waiting,
// aborting and judging a silent peer (shm_transport.h). Connecting is in
// shm_transport_connect.cc, single copy and the zero-copy heap in shm_single_copy.cc.
#include "collectives/transport/shm/shm_transport.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/transport/peer_failure.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/shm/shm_segment.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {

using shm::kAlign;
using shm::kHeaderBytes;
using shm::kHeapAlign;
using shm::kRingCtlBytes;
using shm::kSlotAreaBytes;
using shm::kSmallSlots;
using shm::RoundUp;

namespace {
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}
}  // namespace

ShmWaitPolicy ChooseShmWaitPolicy(int ranks, int busy_threads_per_rank, long cpus) {
  const long busy = static_cast<long>(ranks) * std::max(1, busy_threads_per_rank);
  if (ranks > cpus) return {1, 1000};  // yielding may run the rank we wait for
  if (busy > cpus) return {0, 0};      // yielding would run our own compute thread
  return {256, 2000};
}

ShmTransport::ShmTransport(int rank, int size, const ShmOptions& options)
    : rank_(rank),
      size_(size),
      options_(options),
      slot_bytes_(kRingCtlBytes + kSlotAreaBytes + options.ring_bytes),
      heap_offset_(RoundUp(kHeaderBytes + slot_bytes_ * size, kHeapAlign)),
      segment_bytes_(options.heap_bytes > 0 ? heap_offset_ + RoundUp(options.heap_bytes, kAlign)
                                            : kHeaderBytes + slot_bytes_ * size),
      segments_(size),
      peer_processes_(size),
      seen_tail_(size, 0),
      small_sent_(size, 0),
      small_seen_consumed_(size, 0),
      small_received_(size, 0) {
  const ShmWaitPolicy chosen =
      ChooseShmWaitPolicy(size, options.busy_threads_per_rank, sysconf(_SC_NPROCESSORS_ONLN));
  spin_ = options.spin_iterations >= 0 ? options.spin_iterations : chosen.spin_iterations;
  yield_ = options.yield_iterations >= 0 ? options.yield_iterations : chosen.yield_iterations;
}

ShmTransport::~ShmTransport() { Free(); }

ShmTransport::Header* ShmTransport::header(int r) const {
  return static_cast<Header*>(segments_[r].base);
}

ShmTransport::Ring* ShmTransport::ring(int owner, int sender) const {
  char* base = static_cast<char*>(segments_[owner].base);
  return reinterpret_cast<Ring*>(base + kHeaderBytes + slot_bytes_ * sender);
}

ShmTransport::Slot* ShmTransport::slots(int owner, int sender) const {
  return reinterpret_cast<Slot*>(reinterpret_cast<char*>(ring(owner, sender)) + kRingCtlBytes);
}

char* ShmTransport::ring_data(int owner, int sender) const {
  return reinterpret_cast<char*>(ring(owner, sender)) + kRingCtlBytes + kSlotAreaBytes;
}

std::shared_ptr<TransportHeap> ShmTransport::heap() const {
  if (own_ == nullptr || own_->heap().bytes() == 0) return nullptr;
  return own_;
}

// Wakes rank r if it sleeps. The fast path touches only `sleeping` (read-mostly): a rank
// announces sleep (sleeping = 1, a full barrier) and then re-checks its rings before
// futex_wait, while a producer publishes head/tail, fences, then reads `sleeping`; one of the
// two always sees the other (Dekker), so no wake-up is lost.
void ShmTransport::RingDoorbell(int r) const {
  Header* h = header(r);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h->sleeping.load(std::memory_order_relaxed) != 0) {
    h->doorbell.fetch_add(1);
    FutexWakeAll(&h->doorbell);
  }
}

void ShmTransport::AbortOnPeerFailure(int failed_rank) {
  if (segments_[rank_].base != nullptr) {
    // Abort()'s store of `aborted` publishes it (seq_cst); peers read it after `aborted`.
    header(rank_)->failed_rank.store(failed_rank, std::memory_order_relaxed);
  }
  Abort();
}

void ShmTransport::Abort() {
  aborted_.store(true);
  if (segments_[rank_].base == nullptr) return;
  header(rank_)->aborted.store(1);
  for (int r = 0; r < size_; ++r) {
    if (segments_[r].base == nullptr) continue;
    header(r)->doorbell.fetch_add(1);
    FutexWakeAll(&header(r)->doorbell);
  }
}

size_t ShmTransport::RingFree(int peer, uint64_t head, size_t want) {
  // The consumer's tail is read only when the last value seen leaves too little room: the
  // tail's cache line then stays with the consumer (one cross-core miss less per message).
  uint64_t& tail = seen_tail_[peer];
  const size_t R = options_.ring_bytes;
  if (R - static_cast<size_t>(head - tail) < want) {
    tail = ring(peer, rank_)->tail.load(std::memory_order_acquire);
  }
  return R - static_cast<size_t>(head - tail);
}

void ShmTransport::RingWrite(int owner, int sender, uint64_t at, const void* src, size_t n) const {
  const size_t R = options_.ring_bytes, pos = at % R, first = std::min(n, R - pos);
  std::memcpy(ring_data(owner, sender) + pos, src, first);
  std::memcpy(ring_data(owner, sender), static_cast<const char*>(src) + first, n - first);
}

void ShmTransport::RingRead(int owner, int sender, uint64_t at, void* dst, size_t n) const {
  const size_t R = options_.ring_bytes, pos = at % R, first = std::min(n, R - pos);
  std::memcpy(dst, ring_data(owner, sender) + pos, first);
  std::memcpy(static_cast<char*>(dst) + first, ring_data(owner, sender), n - first);
}

bool ShmTransport::TryPush(const SendSpec& send, PieceCursor* out, size_t* pushed) {
  Ring* rg = ring(send.peer, rank_);
  const size_t R = options_.ring_bytes;
  const uint64_t head = rg->head.load(std::memory_order_relaxed);
  const size_t pos = head % R;
  const size_t remaining = send.len - *pushed;
  const size_t free = RingFree(send.peer, head, std::min(remaining, R - pos));
  size_t n = std::min({remaining, free, R - pos});
  if (n < remaining) n = n / kAlign * kAlign;  // only the last piece may be unaligned
  if (n == 0) return false;
  out->CopyOut(ring_data(send.peer, rank_) + pos, n);
  *pushed += n;
  const size_t advance = *pushed == send.len ? RoundUp(n, kAlign) : n;
  rg->head.store(head + advance, std::memory_order_release);
  RingDoorbell(send.peer);
  return true;
}

bool ShmTransport::TryPop(const RecvSpec& recv, PieceCursor* in, size_t* got) {
  Ring* rg = ring(rank_, recv.peer);
  const size_t R = options_.ring_bytes;
  const uint64_t tail = rg->tail.load(std::memory_order_relaxed);
  const uint64_t head = rg->head.load(std::memory_order_acquire);
  if (head == tail) return false;
  const size_t pos = tail % R;
  const size_t span = std::min(static_cast<size_t>(head - tail), R - pos);
  const size_t real = std::min(span, recv.len - *got);
  const char* src = ring_data(rank_, recv.peer) + pos;
  if (recv.sink != nullptr) {
    (*recv.sink)(*got, src, real);
  } else {
    in->CopyIn(src, real);
  }
  *got += real;
  const size_t advance = *got == recv.len ? RoundUp(real, kAlign) : real;
  rg->tail.store(tail + advance, std::memory_order_release);
  RingDoorbell(recv.peer);
  return true;
}

bool ShmTransport::TryPushSmall(const SendSpec& send, PieceCursor* out) {
  uint64_t& next = small_sent_[send.peer];
  uint64_t& consumed = small_seen_consumed_[send.peer];
  if (next - consumed >= kSmallSlots) {
    consumed = ring(send.peer, rank_)->slots_consumed.load(std::memory_order_acquire);
    if (next - consumed >= kSmallSlots) return false;
  }
  Slot& slot = slots(send.peer, rank_)[next % kSmallSlots];
  if (send.pieces.empty()) {
    std::memcpy(slot.payload, send.data, send.len);
  } else {
    out->CopyOut(slot.payload, send.len);
  }
  ++next;
  slot.flag.store(next, std::memory_order_release);
  RingDoorbell(send.peer);
  return true;
}

bool ShmTransport::TryPopSmall(const RecvSpec& recv, PieceCursor* in) {
  uint64_t& next = small_received_[recv.peer];
  const Slot& slot = slots(rank_, recv.peer)[next % kSmallSlots];
  if (slot.flag.load(std::memory_order_acquire) != next + 1) return false;
  // A reduction reads the peer's slot in place, straight into its output.
  if (recv.sink != nullptr) {
    (*recv.sink)(0, slot.payload, recv.len);
  } else if (recv.pieces.empty()) {
    std::memcpy(recv.data, slot.payload, recv.len);
  } else {
    in->CopyIn(slot.payload, recv.len);
  }
  ++next;
  ring(rank_, recv.peer)->slots_consumed.store(next, std::memory_order_release);
  RingDoorbell(recv.peer);
  return true;
}

absl::Status ShmTransport::CheckPeer(int peer, const char* what) const {
  Header* h = header(peer);
  if (h->aborted.load() != 0) {
    const int failed = h->failed_rank.load(std::memory_order_relaxed);
    if (failed >= 0 && failed != peer && failed < size_) {
      return RelayedPeerFailure(rank_, peer, failed, what);
    }
    return PeerFailure(peer, absl::StrCat("rank ", rank_, ": peer rank ", peer,
                                          " aborted or failed while ", what, " it"));
  }
  if (peer_processes_[peer].Dead()) {
    return PeerFailure(peer, absl::StrCat("rank ", rank_, ": peer rank ", peer, " (pid ", h->pid,
                                          ") died while ", what, " it; check that process's logs"));
  }
  return absl::OkStatus();
}

absl::Status ShmTransport::SendRecv(const SendSpec& send, const RecvSpec& recv,
                                    absl::Time deadline) {
  const bool sending = send.peer != kNoPeer && send.len > 0;
  const bool receiving = recv.peer != kNoPeer && recv.len > 0;
  const size_t threshold = options_.cma_threshold_bytes;
  const bool send_small = send.len <= kShmSmallMessageBytes;
  const bool recv_small = recv.len <= kShmSmallMessageBytes;
  const bool send_cma = cma_ && !send_small && send.len >= threshold;
  const bool recv_cma = cma_ && !recv_small && recv.len >= threshold;
  const size_t framed_from = options_.direct_threshold_bytes;
  const bool send_framed = direct_ && !send_small && send.len >= framed_from;
  const bool recv_framed = direct_ && !recv_small && recv.len >= framed_from;
  size_t pushed = 0, got = 0;
  PieceCursor out(send), in(recv);
  uint64_t ack_at = 0;  // CMA send: the ring position that acknowledges it
  Framed send_frame, recv_frame;
  auto push = [&] {
    if (send_small) {
      if (!TryPushSmall(send, &out)) return false;
      pushed = send.len;
      return true;
    }
    if (send_framed) return TryPushFramed(send, &out, &pushed, &send_frame);
    return send_cma ? TryPushCma(send, &pushed, &ack_at) : TryPush(send, &out, &pushed);
  };
  auto pop = [&]() -> absl::StatusOr<bool> {
    if (recv_small) {
      if (!TryPopSmall(recv, &in)) return false;
      got = recv.len;
      return true;
    }
    if (recv_framed) return TryPopFramed(recv, &in, &got, &recv_frame);
    if (recv_cma) return TryPopCma(recv, &in, &got);
    return TryPop(recv, &in, &got);
  };
  Header* me = segments_[rank_].base != nullptr ? header(rank_) : nullptr;
  auto deadline_passed = [&] {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank_, ": deadline passed ",
                     receiving && got < recv.len ? absl::StrCat("receiving from rank ", recv.peer)
                                                 : absl::StrCat("sending to rank ", send.peer),
                     " over shared memory (", got, "/", recv.len, " bytes in, ", pushed, "/",
                     send.len, " out); is that rank stopped or overloaded?"));
  };
  int idle = 0;
  uint32_t busy_rounds = 0;
  absl::Time next_check = absl::InfinitePast();
  while ((sending && pushed < send.len) || (receiving && got < recv.len)) {
    if (aborted_.load(std::memory_order_relaxed)) {
      return absl::AbortedError(absl::StrCat("rank ", rank_, " aborted"));
    }
    bool progress = false;
    if (sending && pushed < send.len) progress |= push();
    if (receiving && got < recv.len) {
      LS_ASSIGN_OR_RETURN(bool popped, pop());
      progress |= popped;
    }
    if (progress) {
      idle = 0;
      // A call whose peer always has bytes ready never reaches the idle path's clock: look
      // at it every 64 rounds that moved bytes (one clock read per 64 rounds is noise).
      if (++busy_rounds % 64 == 0 && absl::Now() >= deadline) return deadline_passed();
      continue;
    }
    ++idle;
    if (idle < spin_) {
      _mm_pause();
      continue;
    }
    if (idle < spin_ + yield_) {
      sched_yield();
      continue;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return deadline_passed();
    if (now >= next_check) {
      if (receiving && got < recv.len) LS_RETURN_IF_ERROR(CheckPeer(recv.peer, "receiving from"));
      if (sending && pushed < send.len) LS_RETURN_IF_ERROR(CheckPeer(send.peer, "sending to"));
      next_check = now + absl::Milliseconds(20);
    }
    me->sleeping.store(1);  // seq_cst: a full barrier before the re-check below
    const uint32_t bell = me->doorbell.load();
    bool woke = false;
    if (sending && pushed < send.len) woke |= push();
    if (receiving && got < recv.len) {
      absl::StatusOr<bool> popped = pop();
      if (!popped.ok()) {
        me->sleeping.store(0);
        return popped.status();
      }
      woke |= *popped;
    }
    if (!woke) FutexWait(&me->doorbell, bell, std::min(deadline - now, absl::Milliseconds(10)));
    me->sleeping.store(0);
    idle = woke ? 0 : idle;
  }
  return absl::OkStatus();
}

}  // namespace collectives
}  // namespace lockstep

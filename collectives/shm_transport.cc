#include "collectives/shm_transport.h"

#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "collectives/piece_cursor.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {

namespace {
constexpr size_t RoundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }
constexpr uint64_t kShmMagic = 0x4c53534d52494e47ull;  // "LSSMRING"
constexpr size_t kAlign = 64;
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kRingCtlBytes = 192;
// Small messages: slots of an 8-byte flag, written last, and the contiguous payload (see
// header). 320 bytes: the flag and kShmSmallMessageBytes rounded up to whole cache lines.
constexpr size_t kSlotBytes = RoundUp(8 + kShmSmallMessageBytes, 64);
constexpr size_t kSmallSlots = 32;
// Whole pages, so the ring data after it keeps its offset within a page (with a 10 KiB area,
// ring data started half a page later and 1 KiB all-reduces took 3.0-3.2 us, not 0.4 us).
constexpr size_t kSlotAreaBytes = RoundUp(kSmallSlots * kSlotBytes, 4096);
constexpr size_t kBounceBytes = 128 << 10;      // CMA pieces for a reduction: stay in L2
constexpr size_t kCmaCopyPieceBytes = 1 << 20;  // CMA pieces copied in place (abort checks)
constexpr int kMaxIov = 64;                     // iovecs per process_vm_readv

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// True when `pid` has exited (zombies count as dead: their sockets and mappings are gone).
bool ProcessDead(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}
}  // namespace

struct ShmTransport::Header {
  std::atomic<uint64_t> magic;
  int32_t pid;
  int32_t rank;
  uint64_t self_address;  // this header's address in its owner's process (the CMA probe)
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleeping;
  alignas(64) std::atomic<uint32_t> aborted;
};

struct ShmTransport::Ring {
  alignas(64) std::atomic<uint64_t> head;            // bytes written by the producer (64-aligned)
  alignas(64) std::atomic<uint64_t> tail;            // bytes consumed by the consumer (64-aligned)
  alignas(64) std::atomic<uint64_t> slots_consumed;  // small messages read by the consumer
};

// One small message: small message number m of a pair lives in slot m % kSmallSlots and is
// complete once `flag` == m + 1. The sender copies the payload, then stores the flag with
// release order, and the receiver loads it with acquire order: the payload is there when
// the flag is (on x86 both are plain moves; stores become visible in program order). The
// flag word is never payload, and stale slots hold older numbers, never m + 1.
struct ShmTransport::Slot {
  alignas(64) std::atomic<uint64_t> flag;
  char payload[kSlotBytes - sizeof(uint64_t)];
};

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
      segment_bytes_(kHeaderBytes + slot_bytes_ * size),
      segments_(size),
      seen_tail_(size, 0),
      small_sent_(size, 0),
      small_seen_consumed_(size, 0),
      small_received_(size, 0) {
  const ShmWaitPolicy chosen =
      ChooseShmWaitPolicy(size, options.busy_threads_per_rank, sysconf(_SC_NPROCESSORS_ONLN));
  spin_ = options.spin_iterations >= 0 ? options.spin_iterations : chosen.spin_iterations;
  yield_ = options.yield_iterations >= 0 ? options.yield_iterations : chosen.yield_iterations;
  static_assert(sizeof(Header) <= kHeaderBytes, "header too large");
  static_assert(sizeof(Ring) <= kRingCtlBytes, "ring control too large");
  static_assert(sizeof(Slot) == kSlotBytes, "a slot is whole cache lines");
}

ShmTransport::~ShmTransport() {
  for (auto& m : segments_) {
    if (m.base != nullptr) munmap(m.base, m.bytes);
  }
  if (!own_name_.empty() && !own_unlinked_) shm_unlink(own_name_.c_str());
}

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

absl::StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Connect(int rank, int world_size,
                                                                    const std::string& key_prefix,
                                                                    Store* store,
                                                                    const ShmOptions& options,
                                                                    absl::Time deadline) {
  if (options.ring_bytes == 0 || options.ring_bytes % kAlign != 0) {
    return absl::InvalidArgumentError("shm ring_bytes must be a positive multiple of 64");
  }
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, world_size, options));
  if (world_size == 1) return t;
  absl::BitGen gen;
  t->own_name_ = absl::StrFormat("/lockstep-%016x-r%d-p%d-%08x", Fnv1a(key_prefix), rank, getpid(),
                                 absl::Uniform<uint32_t>(gen));
  auto map = [&](const std::string& name, bool create) -> absl::StatusOr<void*> {
    int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("shm_open ", name, ": ", std::strerror(errno),
                                                 "; check /dev/shm (space, permissions)"));
    }
    if (create && ftruncate(fd, static_cast<off_t>(t->segment_bytes_)) != 0) {
      close(fd);
      return absl::ResourceExhaustedError(absl::StrCat(
          "ftruncate ", name, " to ", t->segment_bytes_, " bytes: ", std::strerror(errno)));
    }
    void* p = mmap(nullptr, t->segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("mmap ", name, ": ", std::strerror(errno)));
    }
    return p;
  };
  LS_ASSIGN_OR_RETURN(void* own, map(t->own_name_, true));
  t->segments_[rank] = {own, t->segment_bytes_};
  Header* h = t->header(rank);
  h->pid = getpid();
  h->rank = rank;
  h->self_address = reinterpret_cast<uint64_t>(h);
  h->magic.store(kShmMagic, std::memory_order_release);
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/shm/", rank), t->own_name_));
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    LS_ASSIGN_OR_RETURN(std::string name,
                        store->Get(absl::StrCat(key_prefix, "/shm/", r), deadline));
    LS_ASSIGN_OR_RETURN(void* p, map(name, false));
    t->segments_[r] = {p, t->segment_bytes_};
    if (t->header(r)->magic.load(std::memory_order_acquire) != kShmMagic ||
        t->header(r)->rank != r) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm segment ", name, " of rank ", r,
                       " is not a Lockstep segment of the "
                       "same group layout; do all ranks use the same options?"));
    }
  }
  // Single copy only if every rank can read every other's memory and all use the same
  // threshold (both ends of a message must agree on how it travels): each reports its own.
  bool cma = t->options_.cma_threshold_bytes > 0;
  for (int r = 0; r < world_size && cma; ++r) cma = r == rank || t->ProbeCma(r);
  const std::string mine = absl::StrCat("cma=", cma ? t->options_.cma_threshold_bytes : 0);
  // Unlink once everyone has mapped everything: nothing is left behind in /dev/shm.
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/shm_mapped/", rank), mine));
  for (int r = 0; r < world_size; ++r) {
    LS_ASSIGN_OR_RETURN(std::string theirs,
                        store->Get(absl::StrCat(key_prefix, "/shm_mapped/", r), deadline));
    cma = cma && theirs == mine;
  }
  t->cma_ = cma;
  if (cma) t->bounce_.resize(kBounceBytes);
  shm_unlink(t->own_name_.c_str());
  t->own_unlinked_ = true;
  return t;
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

bool ShmTransport::TryPush(const SendSpec& send, PieceCursor* out, size_t* pushed) {
  Ring* rg = ring(send.peer, rank_);
  const size_t R = options_.ring_bytes;
  const uint64_t head = rg->head.load(std::memory_order_relaxed);
  const size_t pos = head % R;
  const size_t remaining = send.len - *pushed;
  // The consumer's tail is read only when the last value seen leaves too little room: the
  // tail's cache line then stays with the consumer (one cross-core miss less per message).
  uint64_t& tail = seen_tail_[send.peer];
  if (R - static_cast<size_t>(head - tail) < std::min(remaining, R - pos)) {
    tail = rg->tail.load(std::memory_order_acquire);
  }
  const size_t free = R - static_cast<size_t>(head - tail);
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

bool ShmTransport::ProbeCma(int peer) const {
  const Header* h = header(peer);
  uint64_t magic = 0;
  iovec local{&magic, sizeof(magic)};
  iovec remote{reinterpret_cast<void*>(h->self_address), sizeof(magic)};
  // EPERM (ptrace rules, other uid), ENOSYS (seccomp) or EFAULT: fall back to the rings.
  return process_vm_readv(h->pid, &local, 1, &remote, 1, 0) == sizeof(magic) && magic == kShmMagic;
}

// The descriptor a CMA sender leaves in the ring: where its bytes are, in its process: `len`
// bytes at `address`, or, when `pieces` > 0, over that many BufferPieces whose table is at
// `address`.
struct CmaDescriptor {
  uint64_t address;
  uint64_t len;
  uint64_t pieces;
};
static_assert(sizeof(CmaDescriptor) <= kAlign, "descriptor must fit one ring slot");

bool ShmTransport::TryPushCma(const SendSpec& send, size_t* pushed, uint64_t* ack_at) {
  Ring* rg = ring(send.peer, rank_);
  if (*ack_at == 0) {
    const size_t R = options_.ring_bytes;
    const uint64_t head = rg->head.load(std::memory_order_relaxed);
    if (R - static_cast<size_t>(head - rg->tail.load(std::memory_order_acquire)) < kAlign) {
      return false;
    }
    CmaDescriptor d{reinterpret_cast<uint64_t>(send.data), send.len, 0};
    if (!send.pieces.empty())
      d = {reinterpret_cast<uint64_t>(send.pieces.data()), send.len, send.pieces.size()};
    std::memcpy(ring_data(send.peer, rank_) + head % R, &d, sizeof(d));
    *ack_at = head + kAlign;
    rg->head.store(*ack_at, std::memory_order_release);
    RingDoorbell(send.peer);
    return true;
  }
  // The receiver consumes the descriptor only after it has read every byte.
  if (rg->tail.load(std::memory_order_acquire) < *ack_at) return false;
  *pushed = send.len;
  return true;
}

absl::Status ShmTransport::ReadPeer(int peer, const iovec* local, int nlocal, const iovec* remote,
                                    int nremote, size_t* n) {
  const ssize_t k = process_vm_readv(header(peer)->pid, local, nlocal, remote, nremote, 0);
  if (k > 0) {
    *n = static_cast<size_t>(k);
    return absl::OkStatus();
  }
  const int err = errno;
  LS_RETURN_IF_ERROR(CheckPeer(peer, "receiving from"));
  return absl::UnavailableError(absl::StrCat("rank ", rank_, ": reading out of rank ", peer,
                                             " (process_vm_readv): ", std::strerror(err)));
}

absl::StatusOr<bool> ShmTransport::TryPopCma(const RecvSpec& recv, PieceCursor* in, size_t* got) {
  Ring* rg = ring(rank_, recv.peer);
  const uint64_t tail = rg->tail.load(std::memory_order_relaxed);
  if (rg->head.load(std::memory_order_acquire) == tail) return false;
  CmaDescriptor d;
  std::memcpy(&d, ring_data(rank_, recv.peer) + tail % options_.ring_bytes, sizeof(d));
  if (d.len != recv.len) {
    return absl::InternalError(absl::StrCat("rank ", rank_, ": rank ", recv.peer, " sent ", d.len,
                                            " bytes where ", recv.len,
                                            " were expected; the ranks' collectives differ"));
  }
  if (*got == 0 && d.pieces > 0) {
    // A scattered message: fetch the sender's table of pieces first.
    remote_pieces_.resize(d.pieces);
    const size_t table = d.pieces * sizeof(BufferPiece);
    for (size_t done = 0, n = 0; done < table; done += n) {
      iovec local{reinterpret_cast<char*>(remote_pieces_.data()) + done, table - done};
      iovec remote{reinterpret_cast<void*>(d.address + done), table - done};
      LS_RETURN_IF_ERROR(ReadPeer(recv.peer, &local, 1, &remote, 1, &n));
    }
  }
  const bool reduce = recv.sink != nullptr;
  const size_t piece = std::min(recv.len - *got, reduce ? bounce_.size() : kCmaCopyPieceBytes);
  for (size_t done = 0, n = 0; done < piece; done += n) {
    iovec local[kMaxIov], remote[kMaxIov];
    const int nlocal = reduce ? (local[0] = {bounce_.data() + done, piece - done}, 1)
                              : in->Fill(local, kMaxIov, piece - done);
    PieceCursor theirs(
        reinterpret_cast<void*>(d.address), d.len,
        d.pieces > 0 ? absl::MakeConstSpan(remote_pieces_) : absl::Span<BufferPiece>());
    theirs.Advance(*got + done);
    const int nremote = theirs.Fill(remote, kMaxIov, piece - done);
    LS_RETURN_IF_ERROR(ReadPeer(recv.peer, local, nlocal, remote, nremote, &n));
    if (!reduce) in->Advance(n);
  }
  if (reduce) (*recv.sink)(*got, bounce_.data(), piece);
  *got += piece;
  if (*got == recv.len) {
    rg->tail.store(tail + kAlign, std::memory_order_release);
    RingDoorbell(recv.peer);
  }
  return true;
}

absl::Status ShmTransport::CheckPeer(int peer, const char* what) const {
  Header* h = header(peer);
  if (h->aborted.load() != 0) {
    return absl::UnavailableError(absl::StrCat("rank ", rank_, ": peer rank ", peer,
                                               " aborted or failed while ", what, " it"));
  }
  if (ProcessDead(h->pid)) {
    return absl::UnavailableError(absl::StrCat("rank ", rank_, ": peer rank ", peer, " (pid ",
                                               h->pid, ") died while ", what,
                                               " it; check that process's logs"));
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
  size_t pushed = 0, got = 0;
  PieceCursor out(send), in(recv);
  uint64_t ack_at = 0;  // CMA send: the ring position that acknowledges it
  auto push = [&] {
    if (send_small) {
      if (!TryPushSmall(send, &out)) return false;
      pushed = send.len;
      return true;
    }
    return send_cma ? TryPushCma(send, &pushed, &ack_at) : TryPush(send, &out, &pushed);
  };
  auto pop = [&]() -> absl::StatusOr<bool> {
    if (recv_small) {
      if (!TryPopSmall(recv, &in)) return false;
      got = recv.len;
      return true;
    }
    if (recv_cma) return TryPopCma(recv, &in, &got);
    return TryPop(recv, &in, &got);
  };
  Header* me = segments_[rank_].base != nullptr ? header(rank_) : nullptr;
  int idle = 0;
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
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": deadline passed ",
                       receiving && got < recv.len ? absl::StrCat("receiving from rank ", recv.peer)
                                                   : absl::StrCat("sending to rank ", send.peer),
                       " over shared memory (", got, "/", recv.len, " bytes in, ", pushed, "/",
                       send.len, " out); is that rank stopped or overloaded?"));
    }
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

#include "collectives/transport/shm/shm_transport.h"

#include <fcntl.h>
#include <immintrin.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "collectives/transport/peer_failure.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/shm/region_allocator.h"
#include "collectives/transport/shm/shm_negotiation.h"
#include "common/secure_random.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

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
constexpr size_t kHeapAlign = 64 << 10;         // the heap starts this aligned in a segment
constexpr size_t kDirectStepBytes = 1 << 20;    // direct reads between abort checks
// A direct message over more pieces than this goes inline (its table would crowd the ring).
constexpr size_t kMaxDirectPieces = 1024;

// The first 64 bytes of a framed message in the ring (see the header). kDirect: the bytes lie
// in the sender's heap: `len` bytes at `offset`, or, when `pieces` > 0, over the table of that
// many DirectPieces that follows the frame. kInline: the bytes follow through the ring.
struct Frame {
  enum Kind : uint32_t { kInline = 1, kDirect = 2 };
  uint32_t kind;
  uint32_t pieces;
  uint64_t len;
  uint64_t offset;
};
static_assert(sizeof(Frame) <= kAlign, "a frame is one ring line");
struct DirectPiece {
  uint64_t offset;  // in the sender's heap
  uint64_t bytes;
};

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

// The inode of this process's PID namespace (0: unknown). Ranks compare it before they judge
// a peer by its pid: in another PID namespace the number names another process, or none.
uint64_t PidNamespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
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
  uint64_t heap_offset;   // the heap: bytes [heap_offset, heap_offset + heap_bytes)
  uint64_t heap_bytes;
  uint64_t pid_ns;  // PidNamespace() of the owner
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleeping;
  alignas(64) std::atomic<uint32_t> aborted;
  // The rank whose failure made this one abort (AbortOnPeerFailure), or -1; written before
  // `aborted`.
  std::atomic<int32_t> failed_rank;
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

// This rank's segment: unmapped when the transport and every heap buffer are gone.
class ShmTransport::OwnSegment final : public TransportHeap {
 public:
  OwnSegment(void* base, size_t bytes, size_t heap_offset, size_t heap_bytes)
      : base_(base), bytes_(bytes), heap_(static_cast<char*>(base) + heap_offset, heap_bytes) {}
  ~OwnSegment() override { munmap(base_, bytes_); }
  void* Allocate(size_t bytes) override { return heap_.Allocate(bytes); }
  void Free(void* p) override { heap_.Free(p); }
  const RegionAllocator& heap() const { return heap_; }

 private:
  void* const base_;
  const size_t bytes_;
  RegionAllocator heap_;
};

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
  static_assert(sizeof(Header) <= kHeaderBytes, "header too large");
  static_assert(sizeof(Ring) <= kRingCtlBytes, "ring control too large");
  static_assert(sizeof(Slot) == kSlotBytes, "a slot is whole cache lines");
}

ShmTransport::~ShmTransport() {
  for (int r = 0; r < size_; ++r) {  // own_ unmaps this rank's own
    if (r != rank_ && segments_[r].base != nullptr) munmap(segments_[r].base, segments_[r].bytes);
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

std::shared_ptr<TransportHeap> ShmTransport::heap() const {
  if (own_ == nullptr || own_->heap().bytes() == 0) return nullptr;
  return own_;
}

namespace {
// "; /dev/shm has N MiB free", or nothing when that cannot be read.
std::string ShmSpace() {
  struct statvfs v;
  if (statvfs("/dev/shm", &v) != 0) return "";
  return absl::StrCat("; /dev/shm has ", (static_cast<uint64_t>(v.f_bavail) * v.f_frsize) >> 20,
                      " MiB free");
}
}  // namespace

absl::StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::Connect(int rank, int world_size,
                                                                    const std::string& key_prefix,
                                                                    Store* store,
                                                                    const ShmOptions& options,
                                                                    absl::Time deadline) {
  if (options.ring_bytes == 0 || options.ring_bytes % kAlign != 0) {
    return absl::InvalidArgumentError("shm ring_bytes must be a positive multiple of 64");
  }
  if (options.heap_bytes > 0 && options.cma_threshold_bytes > 0) {
    return absl::InvalidArgumentError(
        "shm heap_bytes and cma_threshold_bytes are two ways to single copy (in place through "
        "the heap, or process_vm_readv); set one of them");
  }
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, world_size, options));
  if (world_size == 1) return t;
  // A name no other local user can guess, so none can create it first (O_EXCL) to keep the
  // group from forming.
  t->own_name_ = absl::StrFormat("/lockstep-%016x-r%d-p%d-%016x", Fnv1a(key_prefix), rank, getpid(),
                                 SecureRandomUint64());
  auto map = [&](const std::string& name, bool create, size_t bytes) -> absl::StatusOr<void*> {
    int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("shm_open ", name, ": ", std::strerror(errno),
                                                 "; check /dev/shm (space, permissions)"));
    }
    struct stat st;
    if (!create && (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes)) {
      // A peer's advert is a length from another process: map only what the segment holds,
      // so a wrong length can neither map past its end (SIGBUS at the first touch) nor
      // reserve address space for nothing.
      const int64_t actual = fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
      close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat("shm segment ", name, " was advertised as ", bytes, " bytes but holds ",
                       actual, "; do all ranks run the same Lockstep version?"));
    }
    if (create) {
      // Every page is reserved now: a full /dev/shm fails here, clearly, and never as a
      // SIGBUS at the first touch of a ring or heap page in the middle of a collective.
      int err = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
      if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (err != 0) {
        close(fd);
        shm_unlink(name.c_str());
        return absl::ResourceExhaustedError(absl::StrCat(
            "rank ", rank, ": reserving ", bytes >> 10, " KiB of shared memory for segment ", name,
            ": ", std::strerror(err), ShmSpace(),
            ". Give /dev/shm more room (docker run --shm-size; Kubernetes: an emptyDir volume "
            "with medium: Memory) or ask for a smaller shm heap"));
      }
    }
    // MAP_POPULATE: the page tables are filled now, not by a fault at the first touch of each
    // page. Without it a short run paid one fault per new ring page: 2 KiB all-reduces over
    // 2 ranks took 3.5-4.2 us for their first 1000 calls (one 4 KiB page every second call)
    // and 0.65 us once the ring had gone round.
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("mmap ", name, ": ", std::strerror(errno)));
    }
    return p;
  };
  absl::StatusOr<void*> mapped = map(t->own_name_, true, t->segment_bytes_);
  if (!mapped.ok() && absl::IsResourceExhausted(mapped.status()) && options.heap_bytes > 0 &&
      !options.heap_required) {
    spdlog::warn(
        "collectives: rank {} ({}): no zero-copy heap, so shared-memory messages take a copy "
        "more: {}",
        rank, key_prefix, std::string(mapped.status().message()));
    t->segment_bytes_ = kHeaderBytes + t->slot_bytes_ * world_size;
    mapped = map(t->own_name_, true, t->segment_bytes_);
  }
  LS_RETURN_IF_ERROR(mapped.status());
  void* const own = *mapped;
  const size_t heap_bytes =
      t->segment_bytes_ > t->heap_offset_ ? t->segment_bytes_ - t->heap_offset_ : 0;
  t->own_ = std::make_shared<OwnSegment>(own, t->segment_bytes_, t->heap_offset_, heap_bytes);
  t->segments_[rank] = {own, t->segment_bytes_, static_cast<char*>(own) + t->heap_offset_,
                        heap_bytes};
  Header* h = t->header(rank);
  h->pid = getpid();
  h->rank = rank;
  h->self_address = reinterpret_cast<uint64_t>(h);
  h->heap_offset = heap_bytes > 0 ? t->heap_offset_ : 0;
  h->heap_bytes = heap_bytes;
  h->pid_ns = PidNamespace();
  h->failed_rank.store(-1, std::memory_order_relaxed);
  h->magic.store(kShmMagic, std::memory_order_release);
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/shm/", rank),
                                absl::StrCat(t->own_name_, " ", t->segment_bytes_)));
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    LS_ASSIGN_OR_RETURN(std::string value,
                        store->Get(absl::StrCat(key_prefix, "/shm/", r), deadline));
    LS_ASSIGN_OR_RETURN(const SegmentAdvert advert, ParseSegmentAdvert(value, r, kHeaderBytes));
    const size_t bytes = advert.bytes;
    LS_ASSIGN_OR_RETURN(void* p, map(advert.name, false, bytes));
    t->segments_[r] = {p, bytes};
    const Header* peer = t->header(r);
    if (peer->magic.load(std::memory_order_acquire) != kShmMagic || peer->rank != r ||
        peer->heap_offset > bytes || peer->heap_bytes > bytes - peer->heap_offset) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm segment ", advert.name, " of rank ", r,
                       " is not a Lockstep segment of the "
                       "same group layout; do all ranks use the same options?"));
    }
    t->segments_[r].heap = static_cast<const char*>(p) + peer->heap_offset;
    t->segments_[r].heap_bytes = peer->heap_bytes;
    t->WatchPeerProcess(r);
  }
  // Single copy only if every rank can read every other's memory and all use the same
  // threshold (both ends of a message must agree on how it travels): each reports its own.
  // Likewise the heap path: every rank has a heap and frames the same messages.
  bool cma = t->options_.cma_threshold_bytes > 0;
  for (int r = 0; r < world_size && cma; ++r) cma = r == rank || t->ProbeCma(r);
  bool direct = heap_bytes > 0;
  const std::string mine =
      absl::StrCat("cma=", cma ? t->options_.cma_threshold_bytes : 0,
                   ";direct=", direct ? absl::StrCat(options.direct_threshold_bytes) : "off");
  // Unlink once everyone has mapped everything: nothing is left behind in /dev/shm.
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/shm_mapped/", rank), mine));
  for (int r = 0; r < world_size; ++r) {
    LS_ASSIGN_OR_RETURN(std::string theirs,
                        store->Get(absl::StrCat(key_prefix, "/shm_mapped/", r), deadline));
    cma = cma && CapabilityField(theirs, "cma") == CapabilityField(mine, "cma");
    direct = direct && CapabilityField(theirs, "direct") == CapabilityField(mine, "direct");
  }
  t->cma_ = cma;
  t->direct_ = direct;
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
  return PeerFailure(peer, absl::StrCat("rank ", rank_, ": reading out of rank ", peer,
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

bool ShmTransport::TryPushFramed(const SendSpec& send, PieceCursor* out, size_t* pushed,
                                 Framed* f) {
  Ring* rg = ring(send.peer, rank_);
  if (f->kind == Framed::Kind::kInline) return TryPush(send, out, pushed);
  if (f->kind == Framed::Kind::kDirect) {
    // The receiver consumes the frame only after it has read every byte.
    if (rg->tail.load(std::memory_order_acquire) < f->ack_at) return false;
    *pushed = send.len;
    return true;
  }
  // Direct when every byte lies in this rank's heap; a table of pieces follows the frame.
  const RegionAllocator& heap = own_->heap();
  Frame frame{Frame::kDirect, 0, send.len, 0};
  bool direct = true;
  if (send.pieces.empty()) {
    direct = heap.Contains(send.data, send.len);
    if (direct) frame.offset = heap.OffsetOf(send.data);
  } else {
    for (const BufferPiece& p : send.pieces) {
      if (p.bytes == 0) continue;
      direct = direct && heap.Contains(p.data, p.bytes);
      ++frame.pieces;
    }
    direct = direct && frame.pieces <= kMaxDirectPieces;
  }
  if (!direct) frame = {Frame::kInline, 0, send.len, 0};
  const size_t need = kAlign + RoundUp(frame.pieces * sizeof(DirectPiece), kAlign);
  const uint64_t head = rg->head.load(std::memory_order_relaxed);
  if (RingFree(send.peer, head, need) < need) return false;
  RingWrite(send.peer, rank_, head, &frame, sizeof(frame));
  uint64_t at = head + kAlign;  // the table, written entry by entry (no allocation)
  for (size_t i = 0; i < send.pieces.size() && frame.pieces > 0; ++i) {
    const BufferPiece& p = send.pieces[i];
    if (p.bytes == 0) continue;
    const DirectPiece entry{heap.OffsetOf(p.data), p.bytes};
    RingWrite(send.peer, rank_, at, &entry, sizeof(entry));
    at += sizeof(entry);
  }
  rg->head.store(head + need, std::memory_order_release);
  RingDoorbell(send.peer);
  f->kind = direct ? Framed::Kind::kDirect : Framed::Kind::kInline;
  f->ack_at = head + need;
  return true;
}

absl::StatusOr<bool> ShmTransport::TryPopFramed(const RecvSpec& recv, PieceCursor* in, size_t* got,
                                                Framed* f) {
  if (f->kind == Framed::Kind::kInline) return TryPop(recv, in, got);
  Ring* rg = ring(rank_, recv.peer);
  const uint64_t tail = rg->tail.load(std::memory_order_relaxed);
  if (f->kind == Framed::Kind::kUnread) {
    if (rg->head.load(std::memory_order_acquire) == tail) return false;
    Frame frame;
    RingRead(rank_, recv.peer, tail, &frame, sizeof(frame));
    if (frame.len != recv.len || (frame.kind != Frame::kInline && frame.kind != Frame::kDirect) ||
        frame.pieces > kMaxDirectPieces) {
      return absl::InternalError(absl::StrCat(
          "rank ", rank_, ": rank ", recv.peer, " sent a message of ", frame.len, " bytes where ",
          recv.len, " were expected (frame kind ", frame.kind, "); the ranks' collectives differ"));
    }
    if (frame.kind == Frame::kInline) {
      rg->tail.store(tail + kAlign, std::memory_order_release);
      RingDoorbell(recv.peer);
      f->kind = Framed::Kind::kInline;
      return true;
    }
    // The table was published with the frame. Every piece must lie in the peer's heap as
    // mapped here (a corrupt frame must not make us read outside it).
    const Mapping& peer = segments_[recv.peer];
    remote_pieces_.clear();
    uint64_t total = 0;
    auto add = [&](uint64_t offset, uint64_t bytes) {
      if (offset > peer.heap_bytes || bytes > peer.heap_bytes - offset) return false;
      remote_pieces_.push_back({const_cast<char*>(peer.heap) + offset, bytes});
      total += bytes;
      return true;
    };
    bool inside = true;
    if (frame.pieces == 0) {
      inside = add(frame.offset, frame.len);
    } else {
      for (uint32_t i = 0; i < frame.pieces && inside; ++i) {
        DirectPiece p;
        RingRead(rank_, recv.peer, tail + kAlign + i * sizeof(DirectPiece), &p, sizeof(p));
        inside = add(p.offset, p.bytes);
      }
    }
    if (!inside || total != frame.len) {
      return absl::InternalError(absl::StrCat("rank ", rank_, ": rank ", recv.peer,
                                              " described a message outside its shm heap"));
    }
    f->kind = Framed::Kind::kDirect;
    f->ack_at = tail + kAlign + RoundUp(frame.pieces * sizeof(DirectPiece), kAlign);
  }
  ReadDirect(recv, in, got);
  if (*got == recv.len) {
    rg->tail.store(f->ack_at, std::memory_order_release);
    RingDoorbell(recv.peer);
  }
  return true;
}

void ShmTransport::ReadDirect(const RecvSpec& recv, PieceCursor* in, size_t* got) {
  PieceCursor theirs(nullptr, recv.len, absl::MakeConstSpan(remote_pieces_));
  theirs.Advance(*got);
  size_t budget = std::min(recv.len - *got, kDirectStepBytes);
  while (budget > 0) {
    iovec run;
    theirs.Fill(&run, 1, budget);
    // A reduction reads the peer's buffer in place; a copy goes straight to its targets.
    size_t n = run.iov_len;
    if (recv.sink == nullptr) {
      in->CopyIn(run.iov_base, n);
    } else if ((n = n / recv.align * recv.align) > 0) {
      (*recv.sink)(*got, run.iov_base, n);
    } else {
      // An element straddles two of the sender's pieces: the sink gets it whole.
      n = recv.align;
      absl::InlinedVector<char, 64> element(n);
      theirs.CopyOut(element.data(), n);
      (*recv.sink)(*got, element.data(), n);
      *got += n;
      budget -= n;
      continue;
    }
    theirs.Advance(n);
    *got += n;
    budget -= n;
  }
}

void ShmTransport::WatchPeerProcess(int peer) {
  const Header* h = header(peer);
  PeerProcess& p = peer_processes_[peer];
  const uint64_t ns = header(rank_)->pid_ns;
  if (ns == 0 || h->pid_ns != ns) {
    spdlog::warn(
        "collectives: rank {}: rank {} (pid {}) runs in another PID namespace, so a crash of "
        "it shows only at the deadline of the call waiting for it (an abort shows at once); "
        "to see crashes at once, share the PID namespace (Kubernetes: "
        "shareProcessNamespace) or use TCP",
        rank_, peer, h->pid);
    p.watch = PeerProcess::kUnknown;
    return;
  }
  // A pidfd names the process, not its number: a reused pid cannot fool it.
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, h->pid, 0));
  if (fd >= 0) {
    p.pidfd = UniqueFd(fd);
    p.watch = PeerProcess::kPidfd;
  } else {
    p.watch = PeerProcess::kProc;  // no pidfd (kernels before 5.3), or already gone (ESRCH)
  }
}

bool ShmTransport::PeerProcessDead(int peer) const {
  const PeerProcess& p = peer_processes_[peer];
  switch (p.watch) {
    case PeerProcess::kPidfd: {
      pollfd f{p.pidfd.get(), POLLIN, 0};  // readable once the process has exited
      return poll(&f, 1, 0) == 1;
    }
    case PeerProcess::kProc:
      return ProcessDead(header(peer)->pid);
    case PeerProcess::kUnknown:
      break;
  }
  return false;
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
  if (PeerProcessDead(peer)) {
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

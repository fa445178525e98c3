// The layout of a shared-memory segment, as every rank of a ShmTransport group maps it
// (shm_transport.h says how the parts are used):
//
//   [ SegmentHeader, kHeaderBytes ]
//   [ per sender s: RingControl (kRingCtlBytes) | kSmallSlots Slots (kSlotAreaBytes) |
//                   ring data (ShmOptions::ring_bytes) ]                  x world size
//   [ heap, from a kHeapAlign-aligned offset (ShmOptions::heap_bytes), optional ]
//
// and the records a sender writes into a ring line: a CMA descriptor, a framed message's
// Frame and the table of DirectPieces after it. Plain data: no functions beyond RoundUp.
// Thread model: the atomics are shared between processes; who writes which is said per field.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_LAYOUT_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace lockstep {
namespace collectives {

// Messages of at most this many bytes take the small-message path (slots, see
// shm_transport.h).
constexpr size_t kShmSmallMessageBytes = 256;

namespace shm {

constexpr size_t RoundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

constexpr uint64_t kShmMagic = 0x4c53534d52494e47ull;  // "LSSMRING"
constexpr size_t kAlign = 64;
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kRingCtlBytes = 192;
// Small messages: slots of an 8-byte flag, written last, and the contiguous payload (see
// shm_transport.h). 320 bytes: the flag and kShmSmallMessageBytes rounded up to whole cache
// lines.
constexpr size_t kSlotBytes = RoundUp(8 + kShmSmallMessageBytes, 64);
constexpr size_t kSmallSlots = 32;
// Whole pages, so the ring data after it keeps its offset within a page (the measurement:
// bench/transport_tuning.md, "The small-message slot area").
constexpr size_t kSlotAreaBytes = RoundUp(kSmallSlots * kSlotBytes, 4096);
constexpr size_t kBounceBytes = 128 << 10;      // CMA pieces for a reduction: stay in L2
constexpr size_t kCmaCopyPieceBytes = 1 << 20;  // CMA pieces copied in place (abort checks)
constexpr int kMaxIov = 64;                     // iovecs per process_vm_readv
constexpr size_t kHeapAlign = 64 << 10;         // the heap starts this aligned in a segment
constexpr size_t kDirectStepBytes = 1 << 20;    // direct reads between abort checks
// A direct message over more pieces than this goes inline (its table would crowd the ring).
constexpr size_t kMaxDirectPieces = 1024;

// The first kHeaderBytes of every segment. Written by its owner during Setup (magic last,
// with release order); afterwards only the doorbell, sleeping, aborted and failed_rank words
// change.
struct SegmentHeader {
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
static_assert(sizeof(SegmentHeader) <= kHeaderBytes, "header too large");

// The control words of one sender's ring in the receiver's segment.
struct RingControl {
  alignas(64) std::atomic<uint64_t> head;            // bytes written by the producer (64-aligned)
  alignas(64) std::atomic<uint64_t> tail;            // bytes consumed by the consumer (64-aligned)
  alignas(64) std::atomic<uint64_t> slots_consumed;  // small messages read by the consumer
};
static_assert(sizeof(RingControl) <= kRingCtlBytes, "ring control too large");

// One small message: small message number m of a pair lives in slot m % kSmallSlots and is
// complete once `flag` == m + 1. The sender copies the payload, then stores the flag with
// release order, and the receiver loads it with acquire order: the payload is there when
// the flag is (on x86 both are plain moves; stores become visible in program order). The
// flag word is never payload, and stale slots hold older numbers, never m + 1.
struct Slot {
  alignas(64) std::atomic<uint64_t> flag;
  char payload[kSlotBytes - sizeof(uint64_t)];
};
static_assert(sizeof(Slot) == kSlotBytes, "a slot is whole cache lines");

// The descriptor a CMA sender leaves in the ring: where its bytes are, in its process: `len`
// bytes at `address`, or, when `pieces` > 0, over that many BufferPieces whose table is at
// `address`.
struct CmaDescriptor {
  uint64_t address;
  uint64_t len;
  uint64_t pieces;
};
static_assert(sizeof(CmaDescriptor) <= kAlign, "descriptor must fit one ring slot");

// The first 64 bytes of a framed message in the ring (see shm_transport.h). kDirect: the
// bytes lie in the sender's heap: `len` bytes at `offset`, or, when `pieces` > 0, over the
// table of that many DirectPieces that follows the frame. kInline: the bytes follow through
// the ring.
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

}  // namespace shm
}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_LAYOUT_H_

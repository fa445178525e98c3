// Transport: point-to-point byte streams between the ranks of one group. Algorithms
// (algorithms.h) see only this interface; implementations are InProcTransport (threads of
// one process), TcpTransport and ShmTransport.
//
// Messages between a pair of ranks arrive in the order they were sent; there are no tags:
// the Communicator runs one collective at a time, and every rank issues collectives in the
// same order (as with NCCL), so both ends always agree on what the next message is.
//
// The one data-moving call is SendRecv: it sends one message to one peer while receiving one
// message from another (or the same) peer, progressing both at once so that a ring of ranks
// cannot deadlock on full buffers. Either half is skipped when its peer is kNoPeer or its
// length is 0 (both ends of a message always agree on its length). Received bytes are either
// copied to `recv.data`, or handed to `recv.sink` in order, in pieces whose lengths are
// multiples of `recv.align` (an element size), as they arrive: reductions then overlap with
// the transfer and read straight from the transport's buffers (shared memory: no copy).
//
// Scatter-gather: a message may lie over many buffers (`pieces`, in order; `len` is then
// their total and `data` is ignored; zero-length pieces are allowed). The sender gathers
// them and the receiver scatters into its own pieces (TCP: sendmsg/recvmsg with iovecs;
// shared memory: one gather copy into the ring), so a fused bucket of many tensors moves as
// one message, without a packing copy. Only the bytes count: the two ends may cut the same
// message into different pieces, or one may use pieces and the other one buffer.
//
// Zero-copy memory: a transport may offer a heap (heap(), TransportHeap) whose buffers its
// peers read in place. A message whose bytes (every piece) lie in the sender's heap then
// moves with one copy, straight from the sender's buffer into the receiver's (none into a
// reduction), instead of through the transport's own buffers. Its SendRecv returns once the
// receiver has read it, so the sender's buffer must not change meanwhile (as for any send).
//
// Errors: UNAVAILABLE naming the peer (closed, dead or aborted), with the rank the failure
// started at as a payload (peer_failure.h), DEADLINE_EXCEEDED, ABORTED after Abort(). After any
// error the stream is out of step: the owner must not reuse it. Thread model: one thread calls
// SendRecv at a time; Abort() may be called from any thread and makes the pending and every later
// SendRecv return ABORTED promptly (< 100 ms).
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_TRANSPORT_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace lockstep {
namespace collectives {

constexpr int kNoPeer = -1;

// Receives consecutive pieces of a message: `offset` bytes from its start.
using RecvSink = absl::FunctionRef<void(size_t offset, const void* data, size_t len)>;

// One contiguous run of memory: `bytes` at `data`.
struct BufferPiece {
  void* data = nullptr;
  size_t bytes = 0;
};

struct SendSpec {
  int peer = kNoPeer;
  const void* data = nullptr;
  size_t len = 0;
  absl::Span<const BufferPiece> pieces = {};  // non-empty: the message, instead of data
};

struct RecvSpec {
  int peer = kNoPeer;
  void* data = nullptr;  // copy target, when sink is null
  size_t len = 0;
  size_t align = 1;  // pieces handed to sink are multiples of this
  const RecvSink* sink = nullptr;
  absl::Span<const BufferPiece> pieces = {};  // non-empty and no sink: the copy targets
};

// Memory peers read in place (see above). Buffers may outlive the transport: the heap lives
// as long as a shared_ptr to it. Thread model: thread-safe.
class TransportHeap {
 public:
  virtual ~TransportHeap() = default;
  // A 64-byte-aligned buffer of `bytes`, or nullptr when the heap has no room (use ordinary
  // memory then: it still works, with a copy more).
  virtual void* Allocate(size_t bytes) = 0;
  // Returns a buffer from Allocate (nullptr is ignored).
  virtual void Free(void* p) = 0;
};

// A buffer of `bytes` from `heap` that goes back to it when the last owner lets go, and keeps
// the heap alive until then; null when `heap` is null or full.
inline std::shared_ptr<char> AllocateShared(const std::shared_ptr<TransportHeap>& heap,
                                            size_t bytes) {
  char* p = heap == nullptr ? nullptr : static_cast<char*>(heap->Allocate(bytes));
  if (p == nullptr) return nullptr;
  return std::shared_ptr<char>(p, [heap](char* q) { heap->Free(q); });
}

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv,
                                absl::Time deadline) = 0;
  virtual void Abort() = 0;
  // Abort(), telling the peers that this rank leaves because of a failure that started at
  // `failed_rank` (peer_failure.h), so that they name that rank too instead of this one. Best
  // effort: a peer that cannot be told names this rank.
  virtual void AbortOnPeerFailure(int failed_rank) = 0;
  // The zero-copy heap, or nullptr when this transport has none (TCP, in-process, shm
  // without ShmOptions::heap_bytes).
  virtual std::shared_ptr<TransportHeap> heap() const { return nullptr; }
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_TRANSPORT_H_

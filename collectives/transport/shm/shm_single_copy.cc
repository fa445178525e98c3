// ShmTransport's two single-copy paths for large messages (shm_transport.h): CMA, where the
// receiver copies out of the sender's memory with process_vm_readv, and framed messages,
// where it reads in place out of the sender's zero-copy heap. Both leave a record in the ring
// (shm_layout.h: CmaDescriptor, Frame) whose consumption is the sender's acknowledgement.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "collectives/transport/peer_failure.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/shm/region_allocator.h"
#include "collectives/transport/shm/shm_layout.h"
#include "collectives/transport/shm/shm_segment.h"
#include "collectives/transport/shm/shm_transport.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {

using shm::CmaDescriptor;
using shm::DirectPiece;
using shm::Frame;
using shm::kAlign;
using shm::kCmaCopyPieceBytes;
using shm::kDirectStepBytes;
using shm::kMaxDirectPieces;
using shm::kMaxIov;
using shm::RoundUp;

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

}  // namespace collectives
}  // namespace lockstep

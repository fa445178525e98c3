// PieceCursor: a position in a message that lies over one buffer or a list of pieces
// (SendSpec/RecvSpec in transport.h). Transports walk a message with it: gather copies out
// of it, scatter copies into it, or iovecs for sendmsg/recvmsg covering the next bytes.
// Zero-length pieces are skipped. No allocation.
// Ownership: borrows the buffer or the pieces, which must outlive it.
// Thread model: one thread at a time.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_PIECE_CURSOR_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_PIECE_CURSOR_H_

#include <sys/uio.h>

#include <cstddef>

#include "absl/types/span.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {

class PieceCursor {
 public:
  // The message is `pieces` end to end, or (pieces empty) `len` bytes at `data`.
  PieceCursor(const void* data, size_t len, absl::Span<const BufferPiece> pieces);
  explicit PieceCursor(const SendSpec& s) : PieceCursor(s.data, s.len, s.pieces) {}
  explicit PieceCursor(const RecvSpec& r) : PieceCursor(r.data, r.len, r.pieces) {}
  PieceCursor(const PieceCursor&) = delete;  // may point into itself
  PieceCursor& operator=(const PieceCursor&) = delete;

  // Bytes from the start of the message to the cursor.
  size_t offset() const { return offset_; }
  // Moves the cursor `n` bytes on (at most to the end of the pieces).
  void Advance(size_t n);
  // Copies the next `n` bytes of the message to `dst` (gather) and advances.
  void CopyOut(void* dst, size_t n);
  // Copies `n` bytes from `src` into the message at the cursor (scatter) and advances.
  void CopyIn(const void* src, size_t n);
  // Fills up to `max_iov` iovecs with the next bytes of the message, at most `limit` of
  // them; returns how many iovecs (0 at the end). Does not advance.
  int Fill(iovec* iov, int max_iov, size_t limit) const;

 private:
  void SkipEmpty();

  BufferPiece single_;
  absl::Span<const BufferPiece> pieces_;
  size_t index_ = 0;   // current piece
  size_t within_ = 0;  // bytes of it already passed
  size_t offset_ = 0;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_PIECE_CURSOR_H_

#include "collectives/transport/piece_cursor.h"

#include <algorithm>
#include <cstring>

namespace lockstep {
namespace collectives {

PieceCursor::PieceCursor(const void* data, size_t len, absl::Span<const BufferPiece> pieces)
    : single_{const_cast<void*>(data), len}, pieces_(pieces) {
  if (pieces_.empty()) pieces_ = absl::MakeConstSpan(&single_, 1);
  SkipEmpty();
}

void PieceCursor::SkipEmpty() {
  while (index_ < pieces_.size() && within_ == pieces_[index_].bytes) {
    ++index_;
    within_ = 0;
  }
}

void PieceCursor::Advance(size_t n) {
  while (n > 0 && index_ < pieces_.size()) {
    const size_t k = std::min(n, pieces_[index_].bytes - within_);
    within_ += k;
    offset_ += k;
    n -= k;
    SkipEmpty();
  }
}

void PieceCursor::CopyOut(void* dst, size_t n) {
  char* out = static_cast<char*>(dst);
  while (n > 0 && index_ < pieces_.size()) {
    const size_t k = std::min(n, pieces_[index_].bytes - within_);
    std::memcpy(out, static_cast<const char*>(pieces_[index_].data) + within_, k);
    out += k;
    n -= k;
    Advance(k);
  }
}

void PieceCursor::CopyIn(const void* src, size_t n) {
  const char* in = static_cast<const char*>(src);
  while (n > 0 && index_ < pieces_.size()) {
    const size_t k = std::min(n, pieces_[index_].bytes - within_);
    std::memcpy(static_cast<char*>(pieces_[index_].data) + within_, in, k);
    in += k;
    n -= k;
    Advance(k);
  }
}

int PieceCursor::Fill(iovec* iov, int max_iov, size_t limit) const {
  int k = 0;
  size_t within = within_;
  for (size_t i = index_; i < pieces_.size() && k < max_iov && limit > 0; ++i) {
    const size_t len = std::min(pieces_[i].bytes - within, limit);
    if (len > 0) {
      iov[k++] = {static_cast<char*>(pieces_[i].data) + within, len};
      limit -= len;
    }
    within = 0;
  }
  return k;
}

}  // namespace collectives
}  // namespace lockstep

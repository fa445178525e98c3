// Iterator: the interface every stage of an input pipeline implements (readers,
// transformations). Made by a Dataset; used by one thread at a time.
#ifndef LOCKSTEP_DATA_ITERATOR_H_
#define LOCKSTEP_DATA_ITERATOR_H_

#include "absl/status/statusor.h"
#include "data/element.h"

namespace lockstep::data {

class Iterator {
 public:
  virtual ~Iterator() = default;
  // Sets *out and returns true, or returns false at the end of the data. After an
  // error or the end, further calls repeat it.
  virtual absl::StatusOr<bool> Next(Element* out) = 0;

  // Skips up to n elements; returns how many were skipped (fewer only at the end). The
  // default calls Next; stages that can skip without building elements override it, so
  // restoring a data position does not redo their work.
  virtual absl::StatusOr<int64_t> Skip(int64_t n) {
    Element scratch;
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<bool> more = Next(&scratch);
      if (!more.ok()) return more.status();
      if (!*more) return i;
    }
    return n;
  }
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_ITERATOR_H_

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
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_ITERATOR_H_

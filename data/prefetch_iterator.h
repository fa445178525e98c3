// PrefetchIterator: runs an upstream iterator on a background thread, keeping up to
// `buffer_size` elements ready, so reading and batching overlap the training step.
//
// Ownership: owns the upstream iterator and the thread. Thread model: Next is called by
// one consumer thread; the producer thread is the only one touching the upstream
// iterator. The destructor stops the producer (it finishes at most the element it is
// reading) and joins it, so destroying an iterator never leaks a thread.
#ifndef LOCKSTEP_DATA_PREFETCH_ITERATOR_H_
#define LOCKSTEP_DATA_PREFETCH_ITERATOR_H_

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "data/iterator.h"

namespace lockstep::data {

class PrefetchIterator final : public Iterator {
 public:
  PrefetchIterator(std::unique_ptr<Iterator> upstream, int buffer_size);
  ~PrefetchIterator() override;
  absl::StatusOr<bool> Next(Element* out) override;
  // Drops what is buffered, then has the producer skip the rest upstream (without building
  // the elements where the upstream stages can), so resuming at a data position does not
  // make every element before it.
  absl::StatusOr<int64_t> Skip(int64_t n) override;

 private:
  void Produce();

  std::unique_ptr<Iterator> upstream_;  // used only by the producer thread
  const size_t buffer_size_;
  absl::Mutex mu_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;    // upstream ended (or failed)
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // the upstream's error, if any
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  // Skip(): elements the producer is to skip upstream, and how many it did.
  int64_t skip_requested_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t skip_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread producer_;
};

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_PREFETCH_ITERATOR_H_

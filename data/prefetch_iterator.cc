#include "data/prefetch_iterator.h"

namespace lockstep::data {

PrefetchIterator::PrefetchIterator(std::unique_ptr<Iterator> upstream, int buffer_size)
    : upstream_(std::move(upstream)), buffer_size_(buffer_size < 1 ? 1 : buffer_size) {
  producer_ = std::thread([this] { Produce(); });
}

PrefetchIterator::~PrefetchIterator() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  producer_.join();
}

void PrefetchIterator::Produce() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PrefetchIterator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->cancelled_ || self->buffer_.size() < self->buffer_size_;
          },
          this));
      if (cancelled_) return;
    }
    Element e;
    absl::StatusOr<bool> more = upstream_->Next(&e);  // outside the lock
    absl::MutexLock lock(&mu_);
    if (!more.ok() || !*more) {
      status_ = more.ok() ? absl::OkStatus() : more.status();
      done_ = true;
      return;
    }
    buffer_.push_back(std::move(e));
  }
}

absl::StatusOr<bool> PrefetchIterator::Next(Element* out) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](PrefetchIterator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return self->done_ || !self->buffer_.empty();
      },
      this));
  if (!buffer_.empty()) {
    *out = std::move(buffer_.front());
    buffer_.pop_front();
    return true;
  }
  if (!status_.ok()) return status_;
  return false;
}

}  // namespace lockstep::data

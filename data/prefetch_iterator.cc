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
            return self->cancelled_ || self->buffer_.size() < self->buffer_size_ ||
                   self->skip_requested_ > 0;
          },
          this));
      if (cancelled_) return;
      if (skip_requested_ > 0) {
        // An element read before the request came is one of those skipped.
        int64_t want = skip_requested_;
        while (want > 0 && !buffer_.empty()) {
          buffer_.pop_front();
          --want;
          ++skip_done_;
        }
        mu_.Unlock();
        absl::StatusOr<int64_t> skipped = upstream_->Skip(want);  // outside the lock
        mu_.Lock();
        skip_requested_ = 0;
        if (!skipped.ok()) {
          status_ = skipped.status();
          done_ = true;
          return;
        }
        skip_done_ += *skipped;
        if (*skipped < want) {
          done_ = true;  // the upstream ended
          return;
        }
        continue;
      }
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

absl::StatusOr<int64_t> PrefetchIterator::Skip(int64_t n) {
  absl::MutexLock lock(&mu_);
  int64_t skipped = 0;
  while (skipped < n && !buffer_.empty()) {
    buffer_.pop_front();
    ++skipped;
  }
  if (skipped < n && !done_) {
    skip_requested_ = n - skipped;
    skip_done_ = 0;
    mu_.Await(absl::Condition(
        +[](PrefetchIterator* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
          return self->skip_requested_ == 0 || self->done_;
        },
        this));
    skipped += skip_done_;
    skip_done_ = 0;
  }
  if (skipped < n && !status_.ok()) return status_;
  return skipped;
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

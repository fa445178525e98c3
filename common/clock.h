// An injectable clock, so that timeouts are tested without sleeping.
//
// Clock is the interface; RealClock reads the system clock and sleeps for real;
// FakeClock only moves when a test calls Advance(), which also wakes every thread
// blocked in SleepFor/SleepUntil or in an absl::CondVar wait done through WaitUntil.
// Thread model: all methods are thread-safe.
#ifndef LOCKSTEP_COMMON_CLOCK_H_
#define LOCKSTEP_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks until Now() >= deadline.
  virtual void SleepUntil(absl::Time deadline) = 0;
  void SleepFor(absl::Duration d) { SleepUntil(Now() + d); }

  // Waits on `mu` (held by the caller) until `cond` is true or Now() >= deadline.
  // Returns cond's final value. With a FakeClock, the deadline passes only when the
  // test advances time, so code using this is tested without real waiting.
  virtual bool WaitUntil(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // The process-wide real clock. Never deleted.
  static Clock* Real();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override;
  void SleepUntil(absl::Time deadline) override;
  bool WaitUntil(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50));
  absl::Time Now() const override;
  void SleepUntil(absl::Time deadline) override;
  bool WaitUntil(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Moves time forward and wakes every waiter whose deadline has passed.
  void Advance(absl::Duration d);
  // Number of threads currently blocked in SleepUntil/WaitUntil (lets tests wait for a
  // thread to block before advancing).
  int waiters() const;
  // Blocks (in real time, at most `real_timeout`) until at least `n` threads wait on this
  // clock; true if they do. Tests call it before Advance() so the waiter sees the jump.
  bool WaitForWaiters(int n, absl::Duration real_timeout = absl::Seconds(10)) const;

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CLOCK_H_

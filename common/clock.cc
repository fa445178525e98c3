#include "common/clock.h"

namespace lockstep {

Clock* Clock::Real() {
  static Clock* clock = new RealClock();
  return clock;
}

absl::Time RealClock::Now() const { return absl::Now(); }

void RealClock::SleepUntil(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

bool RealClock::WaitUntil(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) {
  return mu->AwaitWithDeadline(cond, deadline);
}

FakeClock::FakeClock(absl::Time start) : now_(start) {}

absl::Time FakeClock::Now() const {
  absl::MutexLock l(&mu_);
  return now_;
}

void FakeClock::SleepUntil(absl::Time deadline) {
  absl::MutexLock l(&mu_);
  ++waiters_;
  struct Reached {
    const absl::Time* now;
    absl::Time deadline;
    bool Done() const { return *now >= deadline; }
  } reached{&now_, deadline};
  mu_.Await(absl::Condition(&reached, &Reached::Done));
  --waiters_;
}

bool FakeClock::WaitUntil(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) {
  {
    absl::MutexLock l(&mu_);
    ++waiters_;
  }
  bool result = false;
  while (true) {
    if (cond.Eval()) {
      result = true;
      break;
    }
    if (Now() >= deadline) break;
    // The condition may depend on state guarded by `mu`, which other threads change while
    // we wait; fake time moves independently. Poll both with a short real wait on `mu`.
    mu->AwaitWithTimeout(cond, absl::Milliseconds(1));
  }
  absl::MutexLock l(&mu_);
  --waiters_;
  return result;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock l(&mu_);
  now_ += d;
}

bool FakeClock::WaitForWaiters(int n, absl::Duration real_timeout) const {
  absl::MutexLock l(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiters_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), real_timeout);
}

int FakeClock::waiters() const {
  absl::MutexLock l(&mu_);
  return waiters_;
}

}  // namespace lockstep

#include "common/signals.h"

#include <pthread.h>

#include <atomic>

namespace lockstep {
namespace {

// The thread that sigwaits. Process-wide because signal dispositions are.
std::atomic<pthread_t> waiter{};
std::atomic<bool> have_waiter{false};

// Runs only in a thread that does not block the signal (one started before BlockSignals).
void HandOn(int signal) {
  if (!have_waiter.load(std::memory_order_acquire)) return;
  const pthread_t target = waiter.load(std::memory_order_acquire);
  if (pthread_equal(target, pthread_self())) return;
  pthread_kill(target, signal);
}

}  // namespace

sigset_t BlockSignals(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  TakeSignalsOnThisThread();

  struct sigaction action {};
  action.sa_handler = HandOn;
  action.sa_flags = SA_RESTART;
  sigfillset(&action.sa_mask);
  for (int s : signals) sigaction(s, &action, nullptr);
  return set;
}

void TakeSignalsOnThisThread() {
  waiter.store(pthread_self(), std::memory_order_release);
  have_waiter.store(true, std::memory_order_release);
}

}  // namespace lockstep

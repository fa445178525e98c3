#include "common/signals.h"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

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

SignalWatcher::SignalWatcher(std::initializer_list<int> signals) {
  set_ = BlockSignals(signals);
  std::mutex mu;
  std::condition_variable cv;
  bool taken = false;
  thread_ = std::thread([&, this] {
    TakeSignalsOnThisThread();
    {
      // Notified under the lock: the constructor cannot return (destroying mu, cv and
      // taken) before this block has released them; nothing here touches them after.
      std::lock_guard<std::mutex> lock(mu);
      taken = true;
      cv.notify_all();
    }
    timespec poll{0, 50 * 1000 * 1000};
    while (!done_.load()) {
      if (sigtimedwait(&set_, nullptr, &poll) > 0) interrupted_.store(true);
    }
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return taken; });
  // Handed on here before the watcher took over: still pending on this thread.
  timespec now{0, 0};
  if (sigtimedwait(&set_, nullptr, &now) > 0) interrupted_.store(true);
}

SignalWatcher::~SignalWatcher() {
  done_.store(true);
  thread_.join();
  TakeSignalsOnThisThread();  // still blocked here; never hand signals to a dead thread
}

}  // namespace lockstep

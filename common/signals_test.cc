#include "common/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// A thread started before BlockSignals, with no signal blocked: what OpenBLAS's pool is in
// a real binary. A process-directed signal may land on it.
class EarlyThread {
 public:
  EarlyThread() {
    thread_ = std::thread([this] {
      // Unblocked whatever the creating thread blocks (an earlier test may have blocked it).
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGUSR2);
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      std::unique_lock<std::mutex> lock(mu_);
      started_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return stop_; });
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return started_; });
  }
  ~EarlyThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  pthread_t handle() { return thread_.native_handle(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stop_ = false;
  std::thread thread_;
};

TEST(SignalsTest, SignalOnAThreadStartedEarlierReachesTheWaiter) {
  EarlyThread early;
  const sigset_t set = BlockSignals({SIGUSR2});
  // Aim at the unblocked thread directly, so the test does not depend on which thread the
  // kernel picks for a process-directed signal. Without the hand-on handler the default
  // action of SIGUSR2 would end the test binary here.
  ASSERT_EQ(pthread_kill(early.handle(), SIGUSR2), 0);
  timespec timeout{5, 0};
  EXPECT_EQ(sigtimedwait(&set, nullptr, &timeout), SIGUSR2);
  // And a process-directed one.
  ASSERT_EQ(kill(getpid(), SIGUSR2), 0);
  EXPECT_EQ(sigtimedwait(&set, nullptr, &timeout), SIGUSR2);
}

TEST(SignalsTest, AnotherThreadCanTakeTheSignals) {
  EarlyThread early;
  const sigset_t set = BlockSignals({SIGUSR2});
  int got = 0;
  std::thread waiter([&] {
    TakeSignalsOnThisThread();
    ASSERT_EQ(pthread_kill(early.handle(), SIGUSR2), 0);
    timespec timeout{5, 0};
    got = sigtimedwait(&set, nullptr, &timeout);
  });
  waiter.join();
  TakeSignalsOnThisThread();
  EXPECT_EQ(got, SIGUSR2);
}

// The watcher's hand-over race: a signal that reached the constructing thread before the
// watcher thread took the signals over (here: made pending on it directly) is not lost.
TEST(SignalWatcherTest, TakesASignalHandedOnBeforeItsThreadTookOver) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGUSR2), 0);  // pending on this thread
  SignalWatcher watcher({SIGUSR2});
  EXPECT_TRUE(watcher.interrupted());
}

TEST(SignalWatcherTest, ASignalOnAnyThreadInterrupts) {
  EarlyThread early;
  SignalWatcher watcher({SIGUSR2});
  EXPECT_FALSE(watcher.interrupted());
  ASSERT_EQ(pthread_kill(early.handle(), SIGUSR2), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!watcher.interrupted() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polls a condition
  }
  EXPECT_TRUE(watcher.interrupted());
}

}  // namespace
}  // namespace lockstep

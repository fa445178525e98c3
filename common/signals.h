// Signal handling for the binaries: shutdown signals are blocked in every thread and taken
// synchronously (sigwait / sigtimedwait) by one thread, so shutdown code runs as ordinary
// code, not in an async handler. BlockSignals should run before any thread starts (threads
// inherit the mask; gRPC starts its own as soon as a channel or server exists).
//
// Threads that exist before main() cannot be covered by the mask: OpenBLAS starts its
// thread pool when the library loads. A process-directed signal may be delivered to one of
// them, where the default action would kill the process. So BlockSignals also installs a
// handler that hands such a signal on to the waiting thread (pthread_kill, which is
// async-signal-safe), where it is blocked and so stays pending for sigwait.
//
// Thread model: the waiting thread is process-wide state (signal dispositions are);
// BlockSignals makes its caller the waiter, TakeSignalsOnThisThread moves that role to
// another thread that has the signals blocked. A signal handed on before the move stays
// pending on the old waiter: prefer taking signals on the thread that called BlockSignals.
#ifndef LOCKSTEP_COMMON_SIGNALS_H_
#define LOCKSTEP_COMMON_SIGNALS_H_

#include <signal.h>

#include <atomic>
#include <initializer_list>
#include <thread>

namespace lockstep {

// Blocks `signals` in the calling thread (and so in every thread it starts later), makes
// the calling thread the one that takes them, and returns them as a set for sigwait.
sigset_t BlockSignals(std::initializer_list<int> signals);

// Makes the calling thread (which must have the signals blocked, e.g. a thread started
// after BlockSignals) the one stray signals are handed on to.
void TakeSignalsOnThisThread();

// For a command whose main thread is busy: blocks `signals` (BlockSignals, so construct it
// before starting any thread or child) and takes them on a thread of its own; interrupted()
// turns true at the first. A signal handed on to the constructing thread before the
// watcher took over is not lost: the constructor takes it once the watcher has. The
// destructor makes the constructing thread the waiter again (the signals stay blocked).
class SignalWatcher {
 public:
  explicit SignalWatcher(std::initializer_list<int> signals = {SIGINT, SIGTERM});
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  bool interrupted() const { return interrupted_.load(); }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::atomic<bool> interrupted_{false};
  std::thread thread_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SIGNALS_H_

// Signal handling for the binaries: shutdown signals are blocked in every thread and taken
// synchronously (sigwait / sigtimedwait) by one thread, so no async handler and no global
// flag is needed. BlockSignals must run before any thread starts (threads inherit the
// mask; gRPC starts its own as soon as a channel or server exists).
#ifndef LOCKSTEP_COMMON_SIGNALS_H_
#define LOCKSTEP_COMMON_SIGNALS_H_

#include <signal.h>

#include <initializer_list>

namespace lockstep {

// Blocks `signals` in the calling thread (and so in every thread it starts later) and
// returns them as a set for sigwait.
sigset_t BlockSignals(std::initializer_list<int> signals);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SIGNALS_H_

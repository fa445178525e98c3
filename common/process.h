// Process-wide settings every Lockstep binary applies first thing in main().
//
// Debian's Abseil is built without NDEBUG, so by default every absl::Mutex lock also updates
// a global lock-order graph (deadlock detection, a debug aid): it showed in the profiles of
// the collectives and of the coordinator's calls. Binaries turn it off, as a release build
// of Abseil would; tests keep it on, so lock-order bugs still surface there.
// Thread model: call from main() before starting any thread.
#ifndef LOCKSTEP_COMMON_PROCESS_H_
#define LOCKSTEP_COMMON_PROCESS_H_

namespace lockstep {

void InitProcess();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_PROCESS_H_

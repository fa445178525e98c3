#include "common/process.h"

#include "absl/synchronization/mutex.h"

namespace lockstep {

void InitProcess() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace lockstep

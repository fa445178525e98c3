// Scheduler hints for latency-sensitive threads.
//
// A collective's progress thread shares its cores with the trainer's compute threads. When
// it waits for a peer it sleeps, and the peer's data wakes it; but Linux's EEVDF scheduler
// lets a woken thread preempt a CPU-bound one only if its slice is shorter, so with the
// default slice a woken progress thread can wait milliseconds for the compute thread's
// slice to end, and the all-reduce that should overlap the backward pass trickles (measured
// on 2 cores, 2 training workers: a 4 MiB gradient all-reduce took 3.1 ms during the
// backward pass; with a 100 us slice and sleeping at once, 0.5 ms).
// Thread model: each call affects only the calling thread.
#ifndef LOCKSTEP_COMMON_SCHED_H_
#define LOCKSTEP_COMMON_SCHED_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

// Asks for scheduler slices of `slice` for the calling thread (sched_setattr's
// sched_runtime for SCHED_OTHER; Linux clamps it to [0.1 ms, 100 ms]), keeping its policy
// and nice value. Kernels before 6.12 accept and ignore it. INVALID_ARGUMENT for a slice
// that is not positive; the kernel's error (e.g. from a seccomp filter) otherwise.
absl::Status RequestSchedulerSlice(absl::Duration slice);

// The calling thread's slice as the kernel reports it (its default when none was requested);
// zero before Linux 6.12, which does not report one.
absl::StatusOr<absl::Duration> CurrentSchedulerSlice();

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SCHED_H_

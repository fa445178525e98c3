// Scheduler hints for latency-sensitive threads, and CPU affinity for worker processes.
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

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// CPU affinity, for training workers that share a host (as MPI's --bind-to core): each
// worker's threads on CPUs of its own. On the 2-core test machines it neither helps nor hurts
// 2 training workers (bench/train_throughput --compare_pinning: 14 rounds with pinned first,
// pinned / unpinned 0.88-1.26x, median 0.99x; 10 rounds alternating which goes first,
// 0.95-1.07x, median 0.99x), so nothing pins by default.
//
// Linux's CPU list syntax (taskset -c, systemd's CPUAffinity=, a cgroup's cpuset.cpus):
// "0-3,6" -> {0, 1, 2, 3, 6}, sorted, without duplicates. INVALID_ARGUMENT naming `what`
// and the bad element for anything else (empty lists included).
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view list,
                                              absl::string_view what = "CPU list");
std::string FormatCpuList(const std::vector<int>& cpus);  // {0, 1, 2, 5} -> "0-2,5"
// The CPUs the calling thread may run on (sched_getaffinity), sorted.
std::vector<int> AllowedCpus();
// Restricts the calling thread, and every thread it creates afterwards, to `cpus`: called
// first thing in main, it binds the whole process. INVALID_ARGUMENT when `cpus` is empty or
// names a CPU the thread may not use (a cgroup or taskset took it away), listing the allowed
// ones; the kernel's error otherwise.
absl::Status SetCpuAffinity(const std::vector<int>& cpus);
// The CPUs of each of `workers` workers sharing this host, `cpus_each` apiece, cut from
// `allowed` in order (worker i: cpus_each of them, after worker i-1's); empty, meaning leave
// them unbound, for one worker or when they do not fit.
std::vector<std::vector<int>> CpusPerWorker(int workers, int cpus_each,
                                            const std::vector<int>& allowed);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SCHED_H_

// The hang verdict and the stragglers of a running job, from every rank's latest flight
// record (proto/lockstep/v1/diagnostics.proto) and how long ago it arrived: a pure function,
// so that every case is a unit test (DESIGN.md, "When a job hangs").
//
// Hang. Every rank runs the same numbered collectives. When some rank's own record shows it
// waited in a collective longer than the threshold (max(min_wait, step_multiple x the
// slowest rank's mean step)), the verdict names the lowest such collective #K and says
// where each rank is: waiting in #K with the others, never entered it (and in which phase of
// which step it is), or past it. The waits and times shown are those the records showed
// plus the records' ages (clocks are never compared across hosts). With min_wait half a
// heartbeat interval, a rank that waits since T says so in a heartbeat by T + 1.5 intervals. A rank
// whose record is older than `stale_after` (no heartbeat: stopped, hung whole, or cut off) is named
// with the age of its last record and where that record left it, since its own view cannot be
// trusted to be current. Example:
//   all-reduce #5123 (4 MiB): worker/0, worker/1 waiting 12.4 s; worker/2 never entered
//   it: in input at step 5123 for 12.5 s
//
// Stragglers. A rank whose mean compute time over a full window of steps is more than
// `straggler_ratio` times the median of the other ranks' (and at least `straggler_min_excess`
// above it) is named: "<task>: compute <mean> ms per step over <steps> steps, the others'
// median <median> ms (<ratio>x)".
//
// Thread model: pure functions.
#ifndef LOCKSTEP_COORDINATOR_HANG_VERDICT_H_
#define LOCKSTEP_COORDINATOR_HANG_VERDICT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "lockstep/v1/diagnostics.pb.h"

namespace lockstep {
namespace coordinator {

struct RankView {
  std::string task;  // "worker/2"
  int rank = 0;
  std::optional<v1::FlightRecord> record;  // nullopt: none received yet
  absl::Duration record_age;               // since the record arrived
};

struct VerdictOptions {
  absl::Duration min_wait = absl::Seconds(1);
  double step_multiple = 10;
  absl::Duration stale_after = absl::Milliseconds(1500);  // 1.5 heartbeat intervals
  double straggler_ratio = 1.5;
  int straggler_min_steps = 50;
  double straggler_min_excess_ms = 1.0;
};

// A rank whose mean compute time per step is straggler_ratio times the others' median.
struct Straggler {
  std::string task;  // "worker/2"
  double compute_ms = 0;
  double median_ms = 0;  // the other ranks'
};

struct Verdict {
  std::string hang;                     // empty: no collective waited longer than the threshold
  std::vector<std::string> stragglers;  // one line per straggler_ranks entry
  std::vector<Straggler> straggler_ranks;
};

// `ranks` in any order (the verdict lists them by rank).
Verdict Diagnose(std::vector<RankView> ranks, const VerdictOptions& options);

// "4 MiB", "12 KiB", "100 B".
std::string FormatBytes(int64_t bytes);
// "input", "all-reduce", ...
std::string PhaseName(v1::TrainPhase phase);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_HANG_VERDICT_H_

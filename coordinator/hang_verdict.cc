#include "coordinator/hang_verdict.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace lockstep {
namespace coordinator {
namespace {

// The collective a rank is in (entered, not left), or null.
const v1::CollectiveRecord* Open(const v1::FlightRecord& r) {
  for (const v1::CollectiveRecord& c : r.collectives()) {
    if (c.left_unix_micros() == 0) return &c;
  }
  return nullptr;
}

// How long `since` (the rank's clock) lies before the record was taken, plus the record's age.
absl::Duration Elapsed(const RankView& v, int64_t since_unix_micros) {
  return absl::Microseconds(v.record->recorded_unix_micros() - since_unix_micros) + v.record_age;
}

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(std::max(d, absl::ZeroDuration())));
}

// Where the rank's record leaves it: "in input at step 20 for 3.1 s".
std::string Where(const RankView& v) {
  return absl::StrCat("in ", PhaseName(v.record->phase()), " at step ", v.record->step(), " for ",
                      Seconds(Elapsed(v, v.record->phase_entered_unix_micros())));
}

std::string Hang(const std::vector<RankView>& ranks, const VerdictOptions& o) {
  double slowest_step_ms = 0;
  for (const RankView& v : ranks) {
    if (v.record.has_value()) slowest_step_ms = std::max(slowest_step_ms, v.record->mean_step_ms());
  }
  const absl::Duration threshold =
      std::max(o.min_wait, absl::Milliseconds(slowest_step_ms * o.step_multiple));
  // The lowest collective some live rank has waited in longer than the threshold.
  const v1::CollectiveRecord* stuck = nullptr;
  for (const RankView& v : ranks) {
    if (!v.record.has_value() || v.record_age > o.stale_after) continue;
    const v1::CollectiveRecord* c = Open(*v.record);
    // What the rank itself saw: a record taken mid-collective a while ago says nothing of a
    // wait since (the rank may have gone on), so its age does not count here.
    if (c == nullptr || v.record->recorded_unix_micros() - c->entered_unix_micros() <=
                            absl::ToInt64Microseconds(threshold)) {
      continue;
    }
    if (stuck == nullptr || c->seq() < stuck->seq()) stuck = c;
  }
  if (stuck == nullptr) return "";
  // How long the live ranks in #K have waited: the longest is shown; a record taken before
  // the last of them entered (older than the shortest wait) cannot tell whether its rank
  // entered since.
  absl::Duration longest, shortest = absl::InfiniteDuration();
  for (const RankView& v : ranks) {
    if (!v.record.has_value() || v.record_age > o.stale_after) continue;
    const v1::CollectiveRecord* c = Open(*v.record);
    if (c == nullptr || c->seq() != stuck->seq()) continue;
    longest = std::max(longest, Elapsed(v, c->entered_unix_micros()));
    shortest = std::min(shortest, Elapsed(v, c->entered_unix_micros()));
  }
  std::vector<std::string> waiting;
  std::vector<std::string> others;
  for (const RankView& v : ranks) {
    if (!v.record.has_value()) {
      others.push_back(absl::StrCat(v.task, " has sent no flight record"));
      continue;
    }
    const v1::CollectiveRecord* c = Open(*v.record);
    const bool in_it = c != nullptr && c->seq() == stuck->seq();
    std::string state;
    if (in_it) {
      state = absl::StrCat("waiting in it ", Seconds(Elapsed(v, c->entered_unix_micros())));
    } else if (v.record->last_seq_entered() < stuck->seq()) {
      state = absl::StrCat("never entered it: ", Where(v));
    } else if (c != nullptr) {
      state = absl::StrCat("past it, waiting in ", c->kind(), " #", c->seq(), " ",
                           Seconds(Elapsed(v, c->entered_unix_micros())));
    } else {
      state = absl::StrCat("left it: ", Where(v));
    }
    if (v.record_age > o.stale_after) {
      others.push_back(absl::StrCat(v.task, " sent no heartbeat for ", Seconds(v.record_age),
                                    " (stopped, hung or cut off?); last seen ", state));
    } else if (in_it) {
      waiting.push_back(v.task);
    } else if (v.record_age > shortest) {
      others.push_back(absl::StrCat(v.task, " not heard from since it began (last seen ",
                                    Seconds(v.record_age), " ago ", Where(v), ")"));
    } else {
      others.push_back(absl::StrCat(v.task, " ", state));
    }
  }
  std::string out = absl::StrCat(stuck->kind(), " #", stuck->seq());
  if (stuck->bytes() > 0) absl::StrAppend(&out, " (", FormatBytes(stuck->bytes()), ")");
  absl::StrAppend(&out, ": ");
  std::vector<std::string> parts;
  if (!waiting.empty()) {
    parts.push_back(absl::StrCat(absl::StrJoin(waiting, ", "), " waiting ", Seconds(longest)));
  }
  parts.insert(parts.end(), others.begin(), others.end());
  absl::StrAppend(&out, absl::StrJoin(parts, "; "));
  return out;
}

std::vector<Straggler> Stragglers(const std::vector<RankView>& ranks, const VerdictOptions& o) {
  std::vector<const RankView*> full;
  for (const RankView& v : ranks) {
    if (v.record.has_value() && v.record->window_steps() >= o.straggler_min_steps) {
      full.push_back(&v);
    }
  }
  std::vector<Straggler> out;
  if (full.size() < 2) return out;
  for (const RankView* v : full) {
    std::vector<double> others;
    for (const RankView* w : full) {
      if (w != v) others.push_back(w->record->mean_compute_ms());
    }
    std::sort(others.begin(), others.end());
    const size_t n = others.size();
    const double median = n % 2 == 1 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
    const double mine = v->record->mean_compute_ms();
    if (mine > o.straggler_ratio * median && mine - median >= o.straggler_min_excess_ms) {
      out.push_back(Straggler{v->task, mine, median});
    }
  }
  return out;
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) {
    return absl::StrFormat("%.3g MiB", static_cast<double>(bytes) / (1 << 20));
  }
  if (bytes >= 1024) return absl::StrFormat("%.3g KiB", static_cast<double>(bytes) / 1024);
  return absl::StrCat(bytes, " B");
}

std::string PhaseName(v1::TrainPhase phase) {
  if (phase == v1::TRAIN_PHASE_UNSPECIFIED) return "an unknown phase";
  std::string name(absl::StripPrefix(v1::TrainPhase_Name(phase), "PHASE_"));
  absl::AsciiStrToLower(&name);
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

Verdict Diagnose(std::vector<RankView> ranks, const VerdictOptions& options) {
  std::sort(ranks.begin(), ranks.end(),
            [](const RankView& a, const RankView& b) { return a.rank < b.rank; });
  Verdict verdict;
  verdict.hang = Hang(ranks, options);
  verdict.straggler_ranks = Stragglers(ranks, options);
  for (const Straggler& s : verdict.straggler_ranks) {
    int steps = 0;
    for (const RankView& v : ranks) {
      if (v.task == s.task && v.record.has_value()) steps = v.record->window_steps();
    }
    verdict.stragglers.push_back(absl::StrFormat(
        "%s: compute %.2f ms per step over %d steps, the others' median %.2f ms (%.1fx)", s.task,
        s.compute_ms, steps, s.median_ms, s.median_ms > 0 ? s.compute_ms / s.median_ms : 0.0));
  }
  return verdict;
}

}  // namespace coordinator
}  // namespace lockstep

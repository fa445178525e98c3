#include "engine/gpu/op_profiler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace lockstep::engine::gpu {

double OpProfiler::Profile::total_ms() const {
  double t = 0;
  for (const Row& r : rows) t += r.total_ms();
  return t;
}

absl::StatusOr<std::unique_ptr<OpProfiler>> OpProfiler::Create(CudaApi* api, CudaStream stream) {
  if (api == nullptr) return absl::InvalidArgumentError("OpProfiler::Create: null CudaApi");
  return std::unique_ptr<OpProfiler>(new OpProfiler(api, stream));
}

OpProfiler::~OpProfiler() {
  absl::MutexLock lock(&mu_);
  // Marks still in flight: their events may be destroyed at once (CUDA defers the release).
  for (CudaEvent e : all_) (void)api_->EventDestroy(e);
}

int OpProfiler::RowLocked(absl::string_view name, absl::string_view op) {
  auto [it, added] = row_index_.try_emplace(name, static_cast<int>(rows_.size()));
  if (added) {
    Row row;
    row.name = std::string(name);
    row.op = std::string(op);
    rows_.push_back(std::move(row));
  }
  return it->second;
}

absl::Status OpProfiler::Mark(absl::string_view name, absl::string_view op, Phase phase,
                              bool call) {
  absl::MutexLock lock(&mu_);
  return MarkLocked(RowLocked(name, op), phase, call);
}

absl::Status OpProfiler::Resume() {
  absl::MutexLock lock(&mu_);
  if (previous_row_ < 0) {
    return absl::FailedPreconditionError("OpProfiler::Resume: no segment to resume");
  }
  return MarkLocked(previous_row_, previous_phase_, /*call=*/false);
}

absl::Status OpProfiler::MarkLocked(int row, Phase phase, bool call) {
  CudaEvent event = nullptr;
  if (!free_.empty()) {
    event = free_.back();
    free_.pop_back();
  } else {
    absl::StatusOr<CudaEvent> made = api_->TimingEventCreate();
    if (!made.ok()) return Annotate(made.status(), "OpProfiler::Mark");
    event = *made;
    all_.push_back(event);
  }
  if (absl::Status s = api_->EventRecord(event, stream_); !s.ok()) {
    free_.push_back(event);
    return Annotate(s, "OpProfiler::Mark");
  }
  if (call) ++rows_[row].calls[static_cast<int>(phase)];
  marks_.push_back(Marked{event, row, phase});
  previous_row_ = current_row_;
  previous_phase_ = current_phase_;
  current_row_ = row;
  current_phase_ = phase;
  return absl::OkStatus();
}

void OpProfiler::BeginStep() {
  absl::MutexLock lock(&mu_);
  ++steps_;
}

absl::Status OpProfiler::HarvestLocked() {
  while (marks_.size() >= 2) {
    const Marked& from = marks_[0];
    absl::StatusOr<float> ms = api_->EventElapsedMs(from.event, marks_[1].event);
    if (absl::IsFailedPrecondition(ms.status())) break;  // not run yet: next time
    if (!ms.ok()) return Annotate(ms.status(), "OpProfiler::Harvest");
    rows_[from.row].ms[static_cast<int>(from.phase)] += *ms;
    free_.push_back(from.event);
    marks_.pop_front();
  }
  return absl::OkStatus();
}

absl::Status OpProfiler::Harvest() {
  absl::MutexLock lock(&mu_);
  return HarvestLocked();
}

absl::Status OpProfiler::Reset() {
  absl::MutexLock lock(&mu_);
  LS_RETURN_IF_ERROR(api_->StreamSynchronize(stream_));
  LS_RETURN_IF_ERROR(HarvestLocked());
  for (Row& r : rows_) r = Row{r.name, r.op};
  steps_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<OpProfiler::Profile> OpProfiler::Finish() {
  absl::MutexLock lock(&mu_);
  LS_RETURN_IF_ERROR(api_->StreamSynchronize(stream_));
  LS_RETURN_IF_ERROR(HarvestLocked());
  Profile p;
  p.steps = steps_;
  p.rows = rows_;
  return p;
}

std::string OpProfiler::Table(const Profile& profile, absl::string_view unit) {
  const double steps = static_cast<double>(std::max<int64_t>(profile.steps, 1));
  const double total = profile.total_ms();
  std::string out = absl::StrFormat(
      "| node | op | forward %s | backward %s | other %s | calls | share of step |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
      unit, unit, unit);
  for (const Row& r : profile.rows) {
    const int64_t calls = r.calls[0] + r.calls[1] + r.calls[2];
    absl::StrAppendFormat(&out, "| %s | %s | %.3f | %.3f | %.3f | %.2f | %.1f%% |\n", r.name, r.op,
                          r.ms[0] / steps, r.ms[1] / steps, r.ms[2] / steps, calls / steps,
                          total > 0 ? 100.0 * r.total_ms() / total : 0.0);
  }
  absl::StrAppendFormat(&out, "| total per step (%d steps) | | | | %.3f %s | | 100%% |\n",
                        profile.steps, total / steps, unit);
  return out;
}

}  // namespace lockstep::engine::gpu

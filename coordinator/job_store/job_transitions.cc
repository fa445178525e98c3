#include "coordinator/job_store/job_transitions.h"

#include <iterator>

namespace lockstep {
namespace {

using T = JobTransition;

constexpr JobTransitionRule kTable[] = {
    {T::kStartAttempt, v1::PENDING, v1::RUNNING}, {T::kStartAttempt, v1::RESTARTING, v1::RUNNING},
    {T::kSucceed, v1::RUNNING, v1::SUCCEEDED},    {T::kRestart, v1::RUNNING, v1::RESTARTING},
    {T::kRequeue, v1::RUNNING, v1::PENDING},      {T::kFail, v1::PENDING, v1::FAILED},
    {T::kFail, v1::RUNNING, v1::FAILED},          {T::kFail, v1::RESTARTING, v1::FAILED},
    {T::kCancel, v1::PENDING, v1::CANCELLED},     {T::kCancel, v1::RUNNING, v1::CANCELLED},
    {T::kCancel, v1::RESTARTING, v1::CANCELLED},
};

}  // namespace

absl::Span<const JobTransitionRule> JobTransitionTable() { return kTable; }

const char* JobTransitionName(JobTransition transition) {
  switch (transition) {
    case T::kStartAttempt:
      return "StartAttempt";
    case T::kSucceed:
      return "Succeed";
    case T::kRestart:
      return "Restart";
    case T::kRequeue:
      return "Requeue";
    case T::kFail:
      return "Fail";
    case T::kCancel:
      return "Cancel";
  }
  return "?";
}

std::optional<JobTransition> FindJobTransition(v1::JobState from, v1::JobState to) {
  for (const JobTransitionRule& rule : kTable) {
    if (rule.from == from && rule.to == to) return rule.transition;
  }
  return std::nullopt;
}

std::optional<v1::JobState> JobStateAfter(JobTransition transition, v1::JobState from) {
  for (const JobTransitionRule& rule : kTable) {
    if (rule.transition == transition && rule.from == from) return rule.to;
  }
  return std::nullopt;
}

bool IsTerminalJobState(v1::JobState state) {
  if (state == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(state)) return false;
  for (const JobTransitionRule& rule : kTable) {
    if (rule.from == state) return false;
  }
  return true;
}

}  // namespace lockstep

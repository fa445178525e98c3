#include "coordinator/job_store/job_transitions.h"

#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/job_store/job_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::lockstep::v1::JobRecord;
using ::lockstep::v1::JobState;
using ::testing::HasSubstr;

const std::vector<JobState> kStates = {v1::JOB_STATE_UNSPECIFIED,
                                       v1::PENDING,
                                       v1::RUNNING,
                                       v1::SUCCEEDED,
                                       v1::FAILED,
                                       v1::CANCELLED,
                                       v1::RESTARTING};

TEST(JobTransitionsTest, TheTableIsTheStateMachine) {
  // The moves the coordinator makes, written out once more here as the test's expectation.
  const std::set<std::pair<JobState, JobState>> legal = {
      {v1::PENDING, v1::RUNNING},      {v1::PENDING, v1::CANCELLED},  {v1::PENDING, v1::FAILED},
      {v1::RUNNING, v1::SUCCEEDED},    {v1::RUNNING, v1::FAILED},     {v1::RUNNING, v1::CANCELLED},
      {v1::RUNNING, v1::PENDING},      {v1::RUNNING, v1::RESTARTING}, {v1::RESTARTING, v1::RUNNING},
      {v1::RESTARTING, v1::CANCELLED}, {v1::RESTARTING, v1::FAILED}};
  std::set<std::pair<JobState, JobState>> rows;
  for (const JobTransitionRule& rule : JobTransitionTable()) {
    EXPECT_TRUE(rows.insert({rule.from, rule.to}).second)
        << "two rows for " << v1::JobState_Name(rule.from) << " -> " << v1::JobState_Name(rule.to);
    EXPECT_EQ(JobStateAfter(rule.transition, rule.from), rule.to);
    EXPECT_TRUE(CanApply(rule.transition, rule.from));
  }
  EXPECT_EQ(rows, legal);
  for (JobState from : kStates) {
    for (JobState to : kStates) {
      EXPECT_EQ(FindJobTransition(from, to).has_value(), legal.count({from, to}) > 0)
          << v1::JobState_Name(from) << " -> " << v1::JobState_Name(to);
    }
  }
}

TEST(JobTransitionsTest, EachTransitionHasANameAndOneTarget) {
  std::map<JobTransition, std::set<JobState>> targets;
  for (const JobTransitionRule& rule : JobTransitionTable()) {
    targets[rule.transition].insert(rule.to);
    EXPECT_STRNE(JobTransitionName(rule.transition), "?");
  }
  for (const auto& [transition, to] : targets) {
    EXPECT_EQ(to.size(), 1u) << JobTransitionName(transition) << " leads to more than one state";
  }
  EXPECT_EQ(FindJobTransition(v1::RESTARTING, v1::RUNNING), JobTransition::kStartAttempt);
  EXPECT_EQ(FindJobTransition(v1::RUNNING, v1::RESTARTING), JobTransition::kRestart);
  EXPECT_FALSE(CanApply(JobTransition::kStartAttempt, v1::RUNNING));
  EXPECT_FALSE(CanApply(JobTransition::kCancel, v1::CANCELLED));
}

TEST(JobTransitionsTest, TerminalStatesAreThoseNoTransitionLeaves) {
  std::set<JobState> terminal;
  for (JobState s : kStates) {
    if (IsTerminalJobState(s)) terminal.insert(s);
  }
  EXPECT_EQ(terminal, (std::set<JobState>{v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}));
  EXPECT_FALSE(IsTerminalJobState(static_cast<JobState>(99)));
}

// The store against the table: every row is taken, every other move refused and the record
// left as it was.
class StoreFollowsTheTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TEST_TMPDIR");
    absl::StatusOr<std::unique_ptr<JobStore>> store =
        JobStore::Open({.state_dir = absl::StrCat(base != nullptr ? base : "/tmp",
                                                  "/job_transitions_test_", ::getpid()),
                        .clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // A new job moved to `state` along the table's shortest path from PENDING.
  JobRecord JobIn(JobState state) {
    std::map<JobState, std::vector<JobState>> path = {{v1::PENDING, {}}};
    std::deque<JobState> queue = {v1::PENDING};
    while (!queue.empty()) {
      const JobState at = queue.front();
      queue.pop_front();
      for (const JobTransitionRule& rule : JobTransitionTable()) {
        if (rule.from != at || path.count(rule.to) > 0) continue;
        path[rule.to] = path[at];
        path[rule.to].push_back(rule.to);
        queue.push_back(rule.to);
      }
    }
    EXPECT_EQ(path.count(state), 1u) << v1::JobState_Name(state) << " cannot be reached";
    absl::StatusOr<JobRecord> job = store_->Create("walk", "spec");
    EXPECT_TRUE(job.ok()) << job.status();
    for (JobState step : path[state]) {
      job = store_->UpdateState(job->id(), step, "walking the table");
      EXPECT_TRUE(job.ok()) << job.status();
    }
    return *job;
  }

  FakeClock clock_{absl::FromUnixSeconds(1800000000)};
  std::unique_ptr<JobStore> store_;
};

TEST_F(StoreFollowsTheTableTest, EveryRowOfTheTableIsTaken) {
  for (const JobTransitionRule& rule : JobTransitionTable()) {
    const JobRecord job = JobIn(rule.from);
    ASSERT_EQ(job.state(), rule.from);
    absl::StatusOr<JobRecord> moved =
        store_->UpdateState(job.id(), rule.to, JobTransitionName(rule.transition));
    ASSERT_TRUE(moved.ok()) << JobTransitionName(rule.transition) << ": " << moved.status();
    EXPECT_EQ(moved->state(), rule.to);
    EXPECT_EQ(moved->transitions(moved->transitions_size() - 1).state(), rule.to);
    EXPECT_EQ(moved->reason(), JobTransitionName(rule.transition));
  }
}

TEST_F(StoreFollowsTheTableTest, EveryOtherMoveIsRefusedAndChangesNothing) {
  int refused = 0;
  for (JobState from : kStates) {
    if (from == v1::JOB_STATE_UNSPECIFIED) continue;  // no job is ever in it
    for (JobState to : kStates) {
      if (FindJobTransition(from, to).has_value()) continue;
      const JobRecord job = JobIn(from);
      absl::StatusOr<JobRecord> moved = store_->UpdateState(job.id(), to, "illegal");
      ASSERT_TRUE(absl::IsFailedPrecondition(moved.status()))
          << v1::JobState_Name(from) << " -> " << v1::JobState_Name(to) << ": " << moved.status();
      EXPECT_THAT(moved.status().message(),
                  HasSubstr(absl::StrCat(job.id(), " is ", v1::JobState_Name(from),
                                         ", cannot become ", v1::JobState_Name(to))));
      absl::StatusOr<JobRecord> after = store_->Get(job.id());
      ASSERT_TRUE(after.ok()) << after.status();
      EXPECT_EQ(after->SerializeAsString(), job.SerializeAsString())
          << "a refused " << v1::JobState_Name(from) << " -> " << v1::JobState_Name(to)
          << " changed the record";
      ++refused;
    }
  }
  EXPECT_EQ(refused,
            6 * 7 - 11);  // every pair of the six real states and UNSPECIFIED, less the rows
  // StartAttempt is the same transition as UpdateState(RUNNING): refused unless it applies.
  const JobRecord running = JobIn(v1::RUNNING);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      store_->StartAttempt(running.id(), "again", {}, std::nullopt).status()));
}

}  // namespace
}  // namespace lockstep

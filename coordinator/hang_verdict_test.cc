#include "coordinator/hang_verdict.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;  // the ranks' clock when they recorded (us)
constexpr int64_t kSecond = 1'000'000;

// A rank that entered collectives 1..`entered` and left all but `open` (0: none open), in
// `phase` of `step` since `phase_for_s` seconds.
RankView Rank(int rank, int64_t entered, int64_t open, v1::TrainPhase phase, int64_t step,
              double wait_s, double phase_for_s = 0, absl::Duration age = absl::ZeroDuration()) {
  RankView v;
  v.task = absl::StrCat("worker/", rank);
  v.rank = rank;
  v.record_age = age;
  v1::FlightRecord r;
  r.set_worker_rank(rank);
  r.set_recorded_unix_micros(kNow);
  r.set_phase(phase);
  r.set_step(step);
  r.set_phase_entered_unix_micros(kNow - static_cast<int64_t>(phase_for_s * kSecond));
  r.set_last_seq_entered(entered);
  r.set_last_seq_left(open == 0 ? entered : entered - 1);
  for (int64_t seq = std::max<int64_t>(1, entered - 2); seq <= entered; ++seq) {
    v1::CollectiveRecord* c = r.add_collectives();
    c->set_seq(seq);
    c->set_kind("all-reduce");
    c->set_bytes(4 << 20);
    c->set_entered_unix_micros(seq == open ? kNow - static_cast<int64_t>(wait_s * kSecond)
                                           : kNow - 10 * kSecond);
    if (seq != open) c->set_left_unix_micros(kNow - 10 * kSecond + 1000);
  }
  r.set_window_steps(50);
  r.set_mean_compute_ms(1);
  r.set_mean_step_ms(2);
  v.record = r;
  return v;
}

TEST(HangVerdictTest, NamesTheRankThatNeverEnteredTheCollective) {
  std::vector<RankView> ranks = {
      Rank(3, 5123, 5123, v1::PHASE_ALL_REDUCE, 5123, 12.0, 12.0, absl::Milliseconds(400)),
      Rank(0, 5123, 5123, v1::PHASE_ALL_REDUCE, 5123, 12.4),
      Rank(1, 5123, 5123, v1::PHASE_ALL_REDUCE, 5123, 11.0),
      Rank(2, 5122, 0, v1::PHASE_INPUT, 5123, 0, 12.5),
  };
  const Verdict v = Diagnose(ranks, {});
  EXPECT_EQ(v.hang,
            "all-reduce #5123 (4 MiB): worker/0, worker/1, worker/3 waiting 12.4 s; worker/2 never "
            "entered it: in input at step 5123 for 12.5 s");
  EXPECT_TRUE(v.stragglers.empty());
}

TEST(HangVerdictTest, NoVerdictBelowTheThreshold) {
  std::vector<RankView> ranks = {Rank(0, 7, 7, v1::PHASE_ALL_REDUCE, 3, 0.5),
                                 Rank(1, 6, 0, v1::PHASE_COMPUTE, 3, 0, 0.5)};
  EXPECT_EQ(Diagnose(ranks, {}).hang, "");
  // Only what the rank saw counts: a record taken 0.5 s into a collective, 0.6 s ago, says
  // nothing of the rank since (it may have gone on).
  ranks[0].record_age = absl::Milliseconds(600);
  EXPECT_EQ(Diagnose(ranks, {}).hang, "");
  ranks[0] = Rank(0, 7, 7, v1::PHASE_ALL_REDUCE, 3, 1.1);
  EXPECT_NE(Diagnose(ranks, {}).hang, "");
}

TEST(HangVerdictTest, TheThresholdGrowsWithTheSlowestStep) {
  std::vector<RankView> ranks = {Rank(0, 7, 7, v1::PHASE_ALL_REDUCE, 3, 5),
                                 Rank(1, 6, 0, v1::PHASE_COMPUTE, 3, 0, 5)};
  ranks[1].record->set_mean_step_ms(800);  // 10 x 0.8 s = 8 s > 5 s
  EXPECT_EQ(Diagnose(ranks, {}).hang, "");
  ranks[1].record->set_mean_step_ms(400);
  EXPECT_NE(Diagnose(ranks, {}).hang, "");
}

TEST(HangVerdictTest, AStoppedRankIsNamedWithTheAgeOfItsLastRecord) {
  // worker/1 was SIGSTOPped inside collective #9: its own record looks like the others'.
  std::vector<RankView> ranks = {
      Rank(0, 9, 9, v1::PHASE_ALL_REDUCE, 4, 2.0),
      Rank(1, 9, 9, v1::PHASE_COMPUTE, 4, 0.1, 0.2, absl::Seconds(2)),
      Rank(2, 9, 9, v1::PHASE_ALL_REDUCE, 4, 1.9),
  };
  EXPECT_EQ(Diagnose(ranks, {}).hang,
            "all-reduce #9 (4 MiB): worker/0, worker/2 waiting 2.0 s; worker/1 sent no heartbeat "
            "for 2.0 s (stopped, hung or cut off?); last seen waiting in it 2.1 s");
  // Stopped in compute, before the collective.
  ranks[1] = Rank(1, 8, 0, v1::PHASE_COMPUTE, 4, 0, 0.3, absl::Seconds(2));
  EXPECT_EQ(Diagnose(ranks, {}).hang,
            "all-reduce #9 (4 MiB): worker/0, worker/2 waiting 2.0 s; worker/1 sent no heartbeat "
            "for 2.0 s (stopped, hung or cut off?); last seen never entered it: in compute at "
            "step 4 for 2.3 s");
}

TEST(HangVerdictTest, ARecordOlderThanTheWaitSaysNothingOfEntering) {
  // worker/1's record was taken before worker/0 entered #9: it may have entered since.
  std::vector<RankView> ranks = {
      Rank(0, 9, 9, v1::PHASE_ALL_REDUCE, 4, 0.8),
      Rank(1, 8, 0, v1::PHASE_COMPUTE, 4, 0, 0.1, absl::Milliseconds(900))};
  EXPECT_EQ(Diagnose(ranks, {.min_wait = absl::Milliseconds(500)}).hang,
            "all-reduce #9 (4 MiB): worker/0 waiting 0.8 s; worker/1 not heard from since it "
            "began (last seen 0.9 s ago in compute at step 4 for 1.0 s)");
}

TEST(HangVerdictTest, AStaleWaiterAloneGivesNoVerdict) {
  // Only the silent rank seems to wait: its view is old, the others are fine.
  std::vector<RankView> ranks = {Rank(0, 9, 0, v1::PHASE_COMPUTE, 4, 0, 0.1),
                                 Rank(1, 9, 9, v1::PHASE_ALL_REDUCE, 4, 5, 5, absl::Seconds(3))};
  EXPECT_EQ(Diagnose(ranks, {}).hang, "");
}

TEST(HangVerdictTest, RanksPastTheCollectiveAndWithoutRecordsAreSaid) {
  RankView missing;
  missing.task = "worker/2";
  missing.rank = 2;
  std::vector<RankView> ranks = {Rank(0, 9, 9, v1::PHASE_ALL_REDUCE, 4, 3),
                                 Rank(1, 10, 0, v1::PHASE_CHECKPOINT, 4, 0, 2.5), missing};
  EXPECT_EQ(Diagnose(ranks, {}).hang,
            "all-reduce #9 (4 MiB): worker/0 waiting 3.0 s; worker/1 left it: in checkpoint at "
            "step 4 for 2.5 s; worker/2 has sent no flight record");
}

TEST(HangVerdictTest, TheLowestStuckCollectiveIsTheOneNamed) {
  std::vector<RankView> ranks = {Rank(0, 9, 9, v1::PHASE_ALL_REDUCE, 4, 3),
                                 Rank(1, 8, 8, v1::PHASE_ALL_REDUCE, 4, 4)};
  // A rank can finish a collective its peers still wait in, and wait in the next one.
  EXPECT_EQ(Diagnose(ranks, {}).hang,
            "all-reduce #8 (4 MiB): worker/1 waiting 4.0 s; worker/0 past it, waiting in "
            "all-reduce #9 3.0 s");
}

TEST(HangVerdictTest, AStragglerIsARankWellAboveTheOthersMedian) {
  std::vector<RankView> ranks = {Rank(0, 9, 0, v1::PHASE_COMPUTE, 4, 0),
                                 Rank(1, 9, 0, v1::PHASE_COMPUTE, 4, 0),
                                 Rank(2, 9, 0, v1::PHASE_COMPUTE, 4, 0)};
  ranks[0].record->set_mean_compute_ms(10);
  ranks[1].record->set_mean_compute_ms(14);
  ranks[2].record->set_mean_compute_ms(31);
  Verdict v = Diagnose(ranks, {});
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0],
            "worker/2: compute 31.00 ms per step over 50 steps, the others' median 12.00 ms "
            "(2.6x)");
  EXPECT_EQ(v.hang, "");
  // Below 1.5x, or a window not yet full, or a difference too small to matter: none.
  ranks[2].record->set_mean_compute_ms(17);
  EXPECT_TRUE(Diagnose(ranks, {}).stragglers.empty());
  ranks[2].record->set_mean_compute_ms(31);
  ranks[2].record->set_window_steps(49);
  EXPECT_TRUE(Diagnose(ranks, {}).stragglers.empty());
  ranks[2].record->set_window_steps(50);
  for (RankView& r : ranks) r.record->set_mean_compute_ms(r.record->mean_compute_ms() / 100);
  EXPECT_TRUE(Diagnose(ranks, {}).stragglers.empty());
}

TEST(HangVerdictTest, TwoRanksCompareWithEachOther) {
  std::vector<RankView> ranks = {Rank(0, 9, 0, v1::PHASE_COMPUTE, 4, 0),
                                 Rank(1, 9, 0, v1::PHASE_COMPUTE, 4, 0)};
  ranks[1].record->set_mean_compute_ms(20);
  const Verdict v = Diagnose(ranks, {});
  ASSERT_EQ(v.stragglers.size(), 1u);
  EXPECT_EQ(v.stragglers[0].rfind("worker/1:", 0), 0u);
}

TEST(HangVerdictTest, FormatsBytesAndPhases) {
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(12 * 1024), "12 KiB");
  EXPECT_EQ(FormatBytes(4 << 20), "4 MiB");
  EXPECT_EQ(FormatBytes(1536 * 1024), "1.5 MiB");
  EXPECT_EQ(PhaseName(v1::PHASE_ALL_REDUCE), "all-reduce");
  EXPECT_EQ(PhaseName(v1::PHASE_INPUT), "input");
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep

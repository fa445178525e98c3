#include "collectives/transport/shm/shm_peer_watch.h"

#include <sys/wait.h>
#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace shm {
namespace {

// Waits until `watch` sees its process dead, or the deadline passes.
bool SeenDeadWithin(const PeerProcessWatch& watch, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (watch.Dead()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return watch.Dead();
}

TEST(PeerProcessWatchTest, ALiveProcessIsNotDead) {
  PeerProcessWatch w = PeerProcessWatch::Start(0, 1, getpid(), 7, 7);
  EXPECT_NE(w.kind(), PeerProcessWatch::Kind::kUnknown);
  EXPECT_FALSE(w.Dead());
  EXPECT_FALSE(ProcessDead(getpid()));
}

TEST(PeerProcessWatchTest, AnExitedChildIsSeenDead) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[1]);
    char c;
    (void)!read(ready[0], &c, 1);  // exits once the parent watches it
    _exit(0);
  }
  PeerProcessWatch w = PeerProcessWatch::Start(0, 1, child, 7, 7);
  EXPECT_FALSE(w.Dead());
  close(ready[1]);  // the child's read returns 0: it exits
  EXPECT_TRUE(SeenDeadWithin(w, absl::Seconds(20)));
  EXPECT_TRUE(ProcessDead(child));  // a zombie counts as dead
  waitpid(child, nullptr, 0);
  close(ready[0]);
}

TEST(PeerProcessWatchTest, AProcessInAnotherPidNamespaceIsNeverJudged) {
  // Its pid names another process here (here: this one's own, alive): nothing is concluded.
  EXPECT_EQ(PeerProcessWatch::Start(0, 1, getpid(), 7, 8).kind(), PeerProcessWatch::Kind::kUnknown);
  EXPECT_EQ(PeerProcessWatch::Start(0, 1, 999999, 0, 0).kind(), PeerProcessWatch::Kind::kUnknown);
  EXPECT_FALSE(PeerProcessWatch::Start(0, 1, 999999, 7, 8).Dead());
}

TEST(PeerProcessWatchTest, ADefaultWatchKnowsNothing) {
  PeerProcessWatch w;
  EXPECT_EQ(w.kind(), PeerProcessWatch::Kind::kUnknown);
  EXPECT_FALSE(w.Dead());
}

}  // namespace
}  // namespace shm
}  // namespace collectives
}  // namespace lockstep

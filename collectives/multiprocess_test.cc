// Four processes over TCP and over shared memory (with the buffer in ordinary memory, and in
// the zero-copy heap that peers read in place): SIGKILL one during large all-reduces and
// the others return UNAVAILABLE within 2 s; SIGSTOP one and the others return
// DEADLINE_EXCEEDED at their deadline. Children are always killed and reaped.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/communicator_factory.h"
#include "collectives/file_store.h"
#include "collectives/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr int kRanks = 4;
// A child's report: its status code, then the message; one write, at most PIPE_BUF bytes, so
// the parent reads it whole.
constexpr size_t kReportBytes = 2048;

// Kills and reaps every child when it goes out of scope; reads each child's result byte.
class Children {
 public:
  ~Children() {
    for (size_t i = 0; i < pids_.size(); ++i) {
      kill(pids_[i], SIGKILL);
      waitpid(pids_[i], nullptr, 0);
      close(result_fds_[i]);
    }
  }
  void Add(pid_t p, int result_fd) {
    pids_.push_back(p);
    result_fds_.push_back(result_fd);
  }
  pid_t operator[](int i) const { return pids_[i]; }
  // What child i reported by `deadline`: its status code (-1: nothing) and message.
  struct Report {
    int code = -1;
    std::string message;
  };
  Report Result(int i, absl::Time deadline) {
    pollfd p{result_fds_[i], POLLIN, 0};
    int ms =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    char buf[kReportBytes];
    ssize_t k = poll(&p, 1, ms) > 0 ? read(result_fds_[i], buf, sizeof(buf)) : -1;
    if (k < 1) return {};
    return {static_cast<unsigned char>(buf[0]), std::string(buf + 1, k - 1)};
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> result_fds_;
};

// Runs in a child: all-reduces `floats` floats in a loop, each call bounded by
// `call_timeout`; writes one byte to `ready_fd` after the first success, and the status code
// of the first failure to `result_fd`; then waits to be killed (exiting would close its
// connections and change what the other ranks see).
// How a group is set up: the transport, and (shared memory) whether the all-reduced buffer
// lies in the zero-copy heap, which peers read in place.
struct Setup {
  TransportKind kind;
  bool heap;
};

[[noreturn]] void ChildMain(int rank, Setup setup, const std::string& dir,
                            const std::string& prefix, size_t floats, absl::Duration call_timeout,
                            int ready_fd, int result_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  FileStore store(dir);
  CommunicatorConfig config;
  config.rank = rank;
  config.world_size = kRanks;
  config.transport = setup.kind;
  if (setup.heap) {
    config.shm.heap_bytes = 8 << 20;
    config.shm.direct_threshold_bytes = 16 << 10;  // both tests' messages travel in place
  }
  config.secret = "multiprocess-secret";
  config.key_prefix = prefix;
  config.connect_timeout = absl::Seconds(30);
  auto comm = CreateCommunicator(config, &store);
  auto report = [&](int code, absl::string_view message = "") {
    std::string r(1, static_cast<char>(code));
    r.append(message.data(), std::min(message.size(), kReportBytes - 1));
    (void)!write(result_fd, r.data(), r.size());
    while (true) pause();  // the parent kills us
  };
  if (!comm.ok()) report(100, comm.status().message());
  std::vector<float> ordinary;
  float* x = nullptr;
  if (setup.heap) {
    if ((*comm)->heap() == nullptr) report(101);
    x = static_cast<float*>((*comm)->heap()->Allocate(floats * sizeof(float)));
    if (x == nullptr) report(102);
  } else {
    ordinary.resize(floats);
    x = ordinary.data();
  }
  std::fill_n(x, floats, 1.0f);
  bool told = false;
  // Bounded: the parent kills us after at most a minute.
  for (int i = 0; i < 100000; ++i) {
    absl::Status s =
        (*comm)->AllReduce(x, x, floats, DType::kF32, ReduceOp::kMean, absl::Now() + call_timeout);
    if (!s.ok()) report(static_cast<int>(s.code()), s.message());
    if (!told) {
      char c = 1;
      (void)!write(ready_fd, &c, 1);
      told = true;
    }
  }
  report(0);
  __builtin_unreachable();  // report() never returns
}

class MultiProcessTest : public ::testing::TestWithParam<Setup> {
 protected:
  // Forks kRanks children and waits until every one completed an all-reduce.
  void StartGroup(size_t floats, absl::Duration call_timeout) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string prefix = UniquePrefix();
    dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", prefix);
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    for (int r = 0; r < kRanks; ++r) {
      int result[2];
      ASSERT_EQ(pipe(result), 0);
      pid_t p = fork();
      ASSERT_GE(p, 0);
      if (p == 0) {
        close(fds[0]);
        close(result[0]);
        ChildMain(r, GetParam(), dir_, prefix, floats, call_timeout, fds[1], result[1]);
      }
      close(result[1]);
      children_.Add(p, result[0]);
    }
    close(fds[1]);
    int ready = 0;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (ready < kRanks && absl::Now() < give_up) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 1000) > 0) {
        char c;
        if (read(fds[0], &c, 1) != 1) break;
        ++ready;
      }
    }
    close(fds[0]);
    ASSERT_EQ(ready, kRanks) << "not every rank completed its first all-reduce";
  }

  std::string dir_;
  Children children_;
};

// A killed rank's sockets close at once, so the survivors fail within kPeerDeathBound; one
// that missed the death would wait out its kCallTimeout, twelve times as long.
TEST_P(MultiProcessTest, SigkillOneRankOthersFailFastUnavailable) {
  constexpr absl::Duration kCallTimeout = absl::Seconds(60);
  constexpr absl::Duration kPeerDeathBound = absl::Seconds(5);
  StartGroup(/*floats=*/1 << 20, kCallTimeout);
  ASSERT_EQ(kill(children_[2], SIGKILL), 0);
  const absl::Time killed = absl::Now();
  for (int r : {0, 1, 3}) {
    Children::Report report = children_.Result(r, killed + kPeerDeathBound);
    EXPECT_EQ(report.code, static_cast<int>(absl::StatusCode::kUnavailable))
        << "rank " << r << ": " << report.message;
    // Every survivor names the dead rank, also those that learn of it from a peer: rank 1
    // never exchanges with rank 2 in a four-rank halving-doubling step.
    EXPECT_THAT(report.message, ::testing::HasSubstr("peer rank 2")) << "rank " << r;
  }
  EXPECT_LT(absl::Now() - killed, kPeerDeathBound + absl::Milliseconds(50));
}

TEST_P(MultiProcessTest, SigstopOneRankOthersHitTheirDeadline) {
  // The survivors' calls in flight end by their kCallTimeout; five times that allows for a
  // loaded machine and is still far below the target's size timeout, which a hang would meet.
  constexpr absl::Duration kCallTimeout = absl::Seconds(1);
  constexpr absl::Duration kStopBound = absl::Seconds(5);  // 5 x kCallTimeout
  StartGroup(/*floats=*/1 << 16, kCallTimeout);
  ASSERT_EQ(kill(children_[1], SIGSTOP), 0);
  const absl::Time stopped = absl::Now();
  for (int r : {0, 2, 3}) {
    Children::Report report = children_.Result(r, stopped + kStopBound);
    EXPECT_EQ(report.code, static_cast<int>(absl::StatusCode::kDeadlineExceeded))
        << "rank " << r << ": " << report.message;
  }
  // The stopped child is killed and reaped by Children's destructor.
}

INSTANTIATE_TEST_SUITE_P(Transports, MultiProcessTest,
                         ::testing::Values(Setup{TransportKind::kTcp, false},
                                           Setup{TransportKind::kShm, false},
                                           Setup{TransportKind::kShm, true}),
                         [](const auto& info) {
                           return absl::StrCat(TransportKindName(info.param.kind),
                                               info.param.heap ? "_heap" : "");
                         });

}  // namespace
}  // namespace collectives
}  // namespace lockstep

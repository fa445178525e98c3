// Multi-process: a real lockstep-coordinator and 3 lockstepd on loopback, observed through
// the real `lockstep status --output=json`. Fault injection with SIGKILL and SIGSTOP.
// Heartbeats are shortened (150 ms interval, 1 s timeout) to keep the test fast. Every
// child is reaped by LocalCluster/Subprocess destructors, also when an assertion fails,
// and dies with the test process (PR_SET_PDEATHSIG).
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"
#include "client/status_format.h"
#include "common/sched.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

// Heartbeats every kInterval, LOST after kTimeout without one: ten missed heartbeats, so that
// a loaded CI machine (2 cores, compiling while tests run) does not lose a live worker.
constexpr absl::Duration kInterval = absl::Milliseconds(200);
constexpr absl::Duration kTimeout = absl::Milliseconds(2000);
// A dead or stopped worker is LOST kTimeout after its last heartbeat, which came at most
// kInterval before the signal (the coordinator judges when asked: no sweep to wait for); the
// margin, half a timeout, is for the status calls of a loaded machine.
const absl::Duration kLostWithin = kTimeout + kInterval + kTimeout / 2;

using testing::ReadFile;
using testing::Result;
using testing::Runfile;
using testing::RunTool;
using testing::TmpDir;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client::LocalClusterOptions o;
    o.coordinator_bin = Runfile("coordinator/lockstep-coordinator");
    o.lockstepd_bin = Runfile("worker/lockstepd");
    o.workers = 3;
    o.cpu_devices = 2;
    o.work_dir = TmpDir("cluster");
    o.heartbeat_interval = kInterval;
    o.heartbeat_timeout = kTimeout;
    o.static_tf_config = true;  // a restarted worker claims the same task
    auto c = client::LocalCluster::StartCoordinator(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
    ASSERT_TRUE(cluster_->StartWorkers().ok());
    ASSERT_TRUE(cluster_->WaitForAlive(3, absl::Now() + absl::Seconds(20)).ok());
  }

  // `lockstep status --output=json`, parsed.
  json StatusJson() {
    std::vector<std::string> argv = {
        Runfile("client/lockstep"), "status", "--output=json",
        absl::StrCat("--coordinator=", cluster_->coordinator_address())};
    for (const std::string& f : cluster_->cli_flags()) argv.push_back(f);
    Result r = RunTool(argv, absl::StrCat(getenv("TEST_TMPDIR"), "/status.out"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(r.output, nullptr, false);
  }

  // The task worker/i's row from the coordinator.
  v1::TaskStatus Row(const v1::GetClusterStatusResponse& s, int i) {
    for (const v1::TaskStatus& t : s.tasks()) {
      if (t.task().type() == "worker" && t.task().index() == i) return t;
    }
    return v1::TaskStatus();
  }

  // Waits until worker/i is in `state`; returns how long it took.
  absl::Duration WaitForState(int i, v1::TaskState state, absl::Duration limit) {
    absl::Time start = absl::Now();
    auto s = cluster_->WaitFor(
        [&](const v1::GetClusterStatusResponse& st) { return Row(st, i).state() == state; },
        start + limit, absl::Milliseconds(10));
    EXPECT_TRUE(s.ok()) << "worker/" << i << " never became " << v1::TaskState_Name(state) << ": "
                        << s.status();
    return absl::Now() - start;
  }

  std::unique_ptr<client::LocalCluster> cluster_;
};

TEST_F(ClusterTest, StatusJsonShowsThreeAlive) {
  json doc = StatusJson();
  ASSERT_FALSE(doc.is_discarded());
  ASSERT_EQ(doc["tasks"].size(), 3u);
  for (const json& t : doc["tasks"]) {
    EXPECT_EQ(t["state"], "ALIVE");
    EXPECT_EQ(t["devices"].size(), 2u);
    EXPECT_NE(t["incarnation"], "0");
  }
}

TEST_F(ClusterTest, SigkillIsLostWithinTimeoutThenRestartIsNewIncarnation) {
  auto before = cluster_->Status();
  ASSERT_TRUE(before.ok());
  const uint64_t old_incarnation = Row(*before, 1).incarnation();

  cluster_->worker(1)->Signal(SIGKILL);
  absl::Duration took = WaitForState(1, v1::LOST, kLostWithin);
  EXPECT_LE(took, kLostWithin);
  // The others stay alive.
  EXPECT_EQ(client::CountInState(*cluster_->Status(), v1::ALIVE), 2);

  ASSERT_TRUE(cluster_->worker(1)->Wait(absl::Now() + absl::Seconds(5)).ok());
  ASSERT_TRUE(cluster_->StartWorker(1).ok());
  WaitForState(1, v1::ALIVE, absl::Seconds(10));
  auto after = cluster_->Status();
  ASSERT_TRUE(after.ok());
  EXPECT_NE(Row(*after, 1).incarnation(), old_incarnation);
  // Same check through the CLI's JSON.
  json doc = StatusJson();
  int alive = 0;
  for (const json& t : doc["tasks"]) alive += t["state"] == "ALIVE";
  EXPECT_EQ(alive, 3);
}

TEST_F(ClusterTest, SigstopIsLostAndSigcontComesBack) {
  const uint64_t incarnation = Row(*cluster_->Status(), 2).incarnation();
  cluster_->worker(2)->Signal(SIGSTOP);
  absl::Duration took = WaitForState(2, v1::LOST, kLostWithin);
  EXPECT_LE(took, kLostWithin);
  cluster_->worker(2)->Signal(SIGCONT);
  WaitForState(2, v1::ALIVE, absl::Seconds(10));
  // Same process, same incarnation: it re-registered after being told it was LOST.
  EXPECT_EQ(Row(*cluster_->Status(), 2).incarnation(), incarnation);
}

TEST_F(ClusterTest, SigtermDeregistersAndExitsZero) {
  cluster_->worker(0)->Signal(SIGTERM);
  auto status = cluster_->worker(0)->Wait(absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "exit 0");
  EXPECT_EQ(Row(*cluster_->Status(), 0).state(), v1::DEREGISTERED);
}

TEST_F(ClusterTest, SecondProcessClaimingLiveTaskIsRefused) {
  // A fourth lockstepd with worker 0's TF_CONFIG and certificate: ALREADY_EXISTS naming the
  // holder; it keeps retrying, so stop it once the refusal is logged. (Under another
  // certificate it would be PERMISSION_DENIED: the task is bound to worker-0's identity.)
  std::string log = absl::StrCat(getenv("TEST_TMPDIR"), "/dup.log");
  SubprocessOptions o;
  o.argv = {Runfile("worker/lockstepd"),
            absl::StrCat("--coordinator=", cluster_->coordinator_address()),
            absl::StrCat("--tf_config=", TmpDir("cluster"), "/tf_config.0.json")};
  auto tls = cluster_->credentials()->Daemon("worker-0");
  ASSERT_TRUE(tls.ok()) << tls.status();
  for (const std::string& f : client::LocalCredentials::Flags(*tls)) o.argv.push_back(f);
  o.log_file = log;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  absl::Time limit = absl::Now() + absl::Seconds(10);
  while (ReadFile(log).find("ALREADY_EXISTS") == std::string::npos && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(ReadFile(log), HasSubstr("held by a live process"));
  (*p)->Stop(absl::Seconds(3));
  EXPECT_EQ(client::CountInState(*cluster_->Status(), v1::ALIVE), 3);
}

// Tests that need no running cluster.
TEST(CliTest, UnreachableCoordinatorFailsFastWithMessage) {
  // A coordinator that stopped: its port refuses connections.
  std::string dir = TmpDir("gone");
  auto credentials = client::LocalCredentials::Create(dir + "/tls");
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  SubprocessOptions o;
  o.argv = {Runfile("coordinator/lockstep-coordinator"), "--port=0",
            absl::StrCat("--port_file=", dir, "/port"),
            absl::StrCat("--state_dir=", dir, "/state")};
  for (const std::string& f : credentials->CoordinatorFlags()) o.argv.push_back(f);
  auto c = Subprocess::Start(o);
  ASSERT_TRUE(c.ok());
  std::string port;
  absl::Time limit = absl::Now() + absl::Seconds(10);
  while ((port = ReadFile(dir + "/port")).empty() && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_FALSE(port.empty());
  (*c)->Stop(absl::Seconds(3));
  std::string address = absl::StrCat("127.0.0.1:", std::stoi(port));
  std::vector<std::string> argv = {Runfile("client/lockstep"), "status",
                                   "--coordinator=" + address};
  for (const std::string& f : credentials->ViewerFlags()) argv.push_back(f);
  Result r = RunTool(argv, dir + "/out");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.took, absl::Seconds(5));
  EXPECT_THAT(r.output, HasSubstr("cannot get the cluster status"));
  EXPECT_THAT(r.output, HasSubstr(address));
}

TEST(CliTest, UnknownSubcommandIsUsageError) {
  Result r = RunTool({Runfile("client/lockstep"), "frobnicate"},
                     absl::StrCat(getenv("TEST_TMPDIR"), "/unknown.out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown command"));
  EXPECT_THAT(r.output, HasSubstr("status"));
}

TEST(CliTest, BadTfConfigExitsTwoWithResolverMessage) {
  Result r = RunTool({Runfile("worker/lockstepd"), "--coordinator=127.0.0.1:1"},
                     absl::StrCat(getenv("TEST_TMPDIR"), "/badtf.out"),
                     {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"]},
                                        "task": {"type": "worker", "index": 4}})"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("task.index"));
}

// A StatefulSet pod's task comes from its name or from a TF_CONFIG, never both.
TEST(CliTest, TaskIndexFromHostnameWithTfConfigExitsTwo) {
  Result r = RunTool(
      {Runfile("worker/lockstepd"), "--coordinator=127.0.0.1:1", "--task_index_from_hostname"},
      absl::StrCat(getenv("TEST_TMPDIR"), "/hostnametf.out"),
      {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"]},
                                        "task": {"type": "worker", "index": 0}})"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--task_index_from_hostname: not with a TF_CONFIG"));
}

// A list that does not parse, one past CPU_SETSIZE, and a CPU this machine does not let us
// use (SetCpuAffinity's refusal): each exits 2 naming the flag.
TEST(CliTest, BadCpuAffinityExitsTwoNamingTheFlag) {
  std::vector<std::string> lists = {"--cpu_affinity=0-", "--cpu_affinity=100000"};
  if (AllowedCpus().back() < 1023) lists.push_back("--cpu_affinity=1023");
  for (const std::string& list : lists) {
    Result r = RunTool({Runfile("worker/lockstepd"), "--coordinator=127.0.0.1:1", list},
                       absl::StrCat(getenv("TEST_TMPDIR"), "/badaffinity.out"));
    EXPECT_EQ(r.exit_code, 2) << list;
    EXPECT_THAT(r.output, HasSubstr("--cpu_affinity")) << list;
  }
}

TEST(CliTest, LocalBringsUpWorkersAndStopsThem) {
  std::string dir = TmpDir("local");
  Result r =
      RunTool({Runfile("client/lockstep"), "local", "--workers=2",
               "--coordinator_bin=" + Runfile("coordinator/lockstep-coordinator"),
               "--lockstepd_bin=" + Runfile("worker/lockstepd"), "--work_dir=" + dir, "--no_job"},
              absl::StrCat(getenv("TEST_TMPDIR"), "/local.out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("2 task(s): 2 ALIVE"));
  // Every worker left the cluster cleanly before the coordinator stopped.
  EXPECT_THAT(ReadFile(dir + "/lockstepd.0.log"), HasSubstr("STOPPING -> STOPPED"));
  EXPECT_THAT(ReadFile(dir + "/coordinator.log"), HasSubstr("coordinator stopped"));
  EXPECT_THAT(ReadFile(dir + "/lockstepd.0.log"), Not(HasSubstr("running on CPU(s)")));
}

TEST(CliTest, LocalPinWorkersGivesEachWorkerACpuOfItsOwn) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to pin two workers to";
  std::string dir = TmpDir("local_pinned");
  Result r =
      RunTool({Runfile("client/lockstep"), "local", "--workers=2", "--pin_workers",
               "--coordinator_bin=" + Runfile("coordinator/lockstep-coordinator"),
               "--lockstepd_bin=" + Runfile("worker/lockstepd"), "--work_dir=" + dir, "--no_job"},
              absl::StrCat(getenv("TEST_TMPDIR"), "/local_pinned.out"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("2 task(s): 2 ALIVE"));
  for (int w = 0; w < 2; ++w) {
    const std::string log = ReadFile(absl::StrCat(dir, "/lockstepd.", w, ".log"));
    EXPECT_THAT(log, HasSubstr(absl::StrCat("running on CPU(s) ", cpus[w])));
    EXPECT_THAT(log, HasSubstr("STOPPING -> STOPPED"));
  }
}

}  // namespace
}  // namespace lockstep

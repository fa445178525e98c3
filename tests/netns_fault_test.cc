// Faults across hosts: a real coordinator and two lockstepd on three Linux network
// namespaces joined by a bridge (tests/netns/netns_network.h), each "host" with its own
// IPv4 and IPv6 address, workers on the TCP transport as across real machines. Every
// scenario runs the digits job with restarts allowed, injects one fault mid-run, and expects
// the job SUCCEEDED, its final variables and optimizer slots bitwise equal to an
// uninterrupted run of the same spec on the same two workers, evaluation accuracy >= 0.96,
// every process gone afterwards, within a bound; each prints how long it took.
//
// Needs root (CI runs as root): where namespaces cannot be made every test skips saying why.
// This process's main thread joins host 0's namespace (the coordinator's) once, before any
// gRPC thread exists, so the driver reaches the coordinator as a client on that host would.
#include <dirent.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "common/ci_skip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/netns/netns_cluster.h"
#include "tests/netns/netns_network.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using testing::NetnsCluster;
using testing::NetnsClusterOptions;
using testing::NetnsNetwork;
using testing::ReadFile;
using testing::Runfile;
using testing::TmpDir;

// As in jobs_test: reports every 150 ms, LOST after 3 s (room for a loaded 2-core machine).
constexpr absl::Duration kInterval = absl::Milliseconds(150);
constexpr absl::Duration kTimeout = absl::Seconds(3);
// Each scenario, start to end, well inside the test's own timeout.
constexpr absl::Duration kScenarioBound = absl::Seconds(120);
constexpr int64_t kFaultStep = 500;

// The digits job with restarts allowed: 400 epochs (11600 steps of 48, a few seconds: long
// enough that the test sees it running past kFaultStep, as reports arrive every heartbeat), a
// checkpoint every 100 steps, the two newest kept.
v1::JobSpec RestartableJob(const std::string& dir) {
  v1::JobSpec spec = testing::DigitsJob(dir);
  spec.set_epochs(400);
  spec.set_num_workers(2);
  spec.mutable_checkpoint()->set_every_steps(100);
  spec.mutable_checkpoint()->set_keep(2);
  spec.mutable_restart_policy()->set_max_restarts(3);
  return spec;
}

// Every process but this one whose command line names `dir` (each process a NetnsCluster
// starts names its work dir in --state_dir).
std::vector<std::string> ProcessesNaming(const std::string& dir) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {"cannot list /proc"};
  while (dirent* e = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid == getpid()) continue;
    std::string cmd = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (absl::StrContains(cmd, dir + "/")) found.push_back(absl::StrCat(pid, ": ", cmd));
  }
  closedir(proc);
  return found;
}

class NetnsFaultTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto net = NetnsNetwork::Create(3, TmpDir("netns"));
    if (!net.ok()) {
      network_status_ = new absl::Status(net.status());
      return;
    }
    net_ = net->release();
    network_status_ = new absl::Status(net_->EnterHost(0));
  }
  static void TearDownTestSuite() {
    delete net_;
    net_ = nullptr;
    delete network_status_;
    network_status_ = nullptr;
    delete reference_;
    reference_ = nullptr;
  }

  void SetUp() override {
    if (network_status_->code() == absl::StatusCode::kFailedPrecondition) {
      LS_SKIP_OR_FAIL_UNLESS_CI("network namespaces (root) for the multi-host tier")
          << network_status_->message();
    }
    ASSERT_TRUE(network_status_->ok()) << *network_status_;
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    work_dir_ = TmpDir(name_);
  }

  void TearDown() override {
    if (cluster_ != nullptr) {
      cluster_->KillAll();
      EXPECT_THAT(ProcessesNaming(cluster_->options().work_dir), ::testing::IsEmpty());
      cluster_.reset();
    }
    if (net_ != nullptr) {
      for (int host : partitioned_) net_->Heal(host).IgnoreError();
      for (int host : delayed_) net_->ClearDelay(host).IgnoreError();
      for (int host : lossy_) net_->ClearLoss(host).IgnoreError();
    }
    for (const std::string& dir : mounts_) umount2(dir.c_str(), MNT_DETACH);
    if (started_ != absl::InfinitePast()) {
      std::cerr << "[netns] " << name_ << ": " << absl::Now() - started_ << "\n";
    }
  }

  // A fresh coordinator and two workers on hosts 0, 1, 2 under `dir`; the scenario's clock
  // starts here.
  void StartCluster(const std::string& dir, bool ipv6 = false) {
    NetnsClusterOptions o;
    o.coordinator_bin = Runfile("coordinator/lockstep-coordinator");
    o.lockstepd_bin = Runfile("worker/lockstepd");
    o.workers = 2;
    o.work_dir = dir;
    o.heartbeat_interval = kInterval;
    o.heartbeat_timeout = kTimeout;
    o.ipv6 = ipv6;
    cluster_ = std::make_unique<NetnsCluster>(net_, o);
    ASSERT_TRUE(cluster_->StartCoordinator().ok()) << cluster_->log("coordinator");
    ASSERT_TRUE(cluster_->StartWorkers().ok());
    auto jobs = client::JobServiceClient::Create(cluster_->coordinator_address(),
                                                 cluster_->client_tls(), absl::Seconds(10));
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    jobs_ = std::move(*jobs);
  }

  // The uninterrupted run, once per test binary (the group configuration is the same in
  // every scenario: two workers over TCP).
  void EnsureReference() {
    if (reference_ != nullptr) return;
    const absl::Time start = absl::Now();
    const std::string dir = TmpDir("reference");
    StartCluster(dir);
    auto id = jobs_->SubmitJob(RestartableJob(dir));
    ASSERT_TRUE(id.ok()) << id.status();
    auto last = jobs_->WatchJob(
        *id, [](const v1::JobEvent&) {}, absl::Now() + kScenarioBound);
    ASSERT_TRUE(last.ok()) << last.status();
    ASSERT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
    EXPECT_GE(last->job().progress().eval_accuracy(), 0.96);
    auto expected = checkpoint::CheckpointManager::RestoreLatest(dir + "/ckpt");
    ASSERT_TRUE(expected.ok()) << expected.status();
    reference_ = new v1::Checkpoint(expected->checkpoint);
    cluster_->KillAll();
    EXPECT_THAT(ProcessesNaming(dir), ::testing::IsEmpty());
    cluster_.reset();
    std::cerr << "[netns] uninterrupted reference run (" << reference_->global_step()
              << " steps): " << absl::Now() - start << "\n";
  }

  // Reference first, then this scenario's cluster; returns the submitted job's id once its
  // first attempt runs at kFaultStep ("" after a failure).
  std::string Begin(const v1::JobSpec* spec = nullptr, bool ipv6 = false) {
    EnsureReference();
    if (reference_ == nullptr) return "";
    started_ = absl::Now();
    StartCluster(work_dir_, ipv6);
    if (cluster_ == nullptr) return "";
    auto id = jobs_->SubmitJob(spec != nullptr ? *spec : RestartableJob(work_dir_));
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return "";
    WaitRunningAt(*id, 1, kFaultStep);
    return ::testing::Test::HasFatalFailure() ? "" : *id;
  }

  // Waits until the job runs attempt `attempt` at step >= `step`.
  void WaitRunningAt(const std::string& id, int attempt, int64_t step) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    absl::StatusOr<v1::GetJobResponse> job;
    while (absl::Now() < deadline) {
      job = jobs_->GetJob(id);
      ASSERT_TRUE(job.ok()) << job.status();
      ASSERT_FALSE(client::JobEnded(job->job().state())) << job->job().reason();
      if (job->job().state() == v1::RUNNING && job->job().attempt() == attempt &&
          job->job().progress().step() >= step) {
        return;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    FAIL() << "job " << id << " did not run attempt " << attempt << " to step " << step << ":\n"
           << (job.ok() ? client::FormatJobDescription(*job) : job.status().ToString());
  }

  // Waits (up to `limit`) until the job is in `state`; returns it.
  v1::JobRecord WaitState(const std::string& id, v1::JobState state, absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    absl::StatusOr<v1::GetJobResponse> job;
    while (absl::Now() < deadline) {
      job = jobs_->GetJob(id);
      if (job.ok() && job->job().state() == state) return job->job();
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << "job " << id << " not " << v1::JobState_Name(state) << " within " << limit
                  << ":\n"
                  << (job.ok() ? client::FormatJobDescription(*job) : job.status().ToString())
                  << "\ncoordinator log:\n"
                  << cluster_->log("coordinator");
    return job.ok() ? job->job() : v1::JobRecord();
  }

  // The job to its end: SUCCEEDED, accuracy >= 0.96, the chief's final checkpoint bitwise
  // equal to the reference's. Returns the final record.
  v1::JobRecord ExpectSucceededAsPromised(const std::string& id, const std::string& ckpt_dir) {
    auto last = jobs_->WatchJob(
        id, [](const v1::JobEvent&) {}, started_ + kScenarioBound);
    EXPECT_TRUE(last.ok()) << last.status() << "\ncoordinator log:\n"
                           << cluster_->log("coordinator");
    if (!last.ok()) return v1::JobRecord();
    const v1::JobRecord& job = last->job();
    EXPECT_EQ(job.state(), v1::SUCCEEDED)
        << job.reason() << "\nworker/0:\n"
        << cluster_->log(cluster_->worker_log_name(0)) << "\nworker/1:\n"
        << cluster_->log(cluster_->worker_log_name(1));
    EXPECT_GE(job.progress().eval_accuracy(), 0.96);
    auto got = checkpoint::CheckpointManager::RestoreLatest(ckpt_dir);
    EXPECT_TRUE(got.ok()) << got.status();
    if (got.ok() && reference_ != nullptr) {
      testing::ExpectBitwiseEqual(got->checkpoint, *reference_);
    }
    // A restarted job resumed from a checkpoint near the fault (they are 100 steps apart;
    // the corrupted-checkpoint scenario falls back one), not from the start.
    if (job.restarts() > 0) {
      EXPECT_GE(job.progress().restored_step(), kFaultStep - 200);
    }
    EXPECT_LT(absl::Now() - started_, kScenarioBound);
    std::cerr << "[netns] " << name_ << ": " << v1::JobState_Name(job.state()) << " after "
              << job.restarts() << " restart(s), attempt " << job.attempt() << " restored step "
              << job.progress().restored_step() << ", eval accuracy "
              << job.progress().eval_accuracy() << "\n";
    return job;
  }

  // Steps the job advances in `d` while a fault is in place; printed with `what`.
  int64_t StepsDuring(const std::string& id, absl::Duration d, const std::string& what) {
    auto before = jobs_->GetJob(id);
    absl::SleepFor(d);
    auto after = jobs_->GetJob(id);
    EXPECT_TRUE(before.ok() && after.ok());
    if (!before.ok() || !after.ok()) return 0;
    const int64_t steps = after->job().progress().step() - before->job().progress().step();
    std::cerr << "[netns] " << name_ << ": " << steps << " steps in " << d << " of " << what
              << "\n";
    return steps;
  }

  // Waits until the job is RESTARTING for worker/`w` after a fault done at `since`.
  void ExpectRestartingFor(const std::string& id, int w, absl::Time since,
                           const std::string& fault) {
    const v1::JobRecord restarting = WaitState(id, v1::RESTARTING, kTimeout + absl::Seconds(10));
    EXPECT_THAT(restarting.reason(), HasSubstr(absl::StrCat("worker/", w)));
    std::cerr << "[netns] " << name_ << ": RESTARTING " << absl::Now() - since << " after " << fault
              << ": " << restarting.reason() << "\n";
  }

  // SIGKILL of worker `w` at kFaultStep; RESTARTING naming it; started again; SUCCEEDED.
  void KillAndRestartWorker(int w, bool ipv6) {
    const std::string id = Begin(nullptr, ipv6);
    ASSERT_FALSE(id.empty());
    cluster_->worker(w)->Signal(SIGKILL);
    const absl::Time killed = absl::Now();
    ASSERT_TRUE(cluster_->worker(w)->Wait(killed + absl::Seconds(10)).ok());
    ExpectRestartingFor(id, w, killed, "SIGKILL");
    ASSERT_TRUE(cluster_->StartWorker(w).ok());
    const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
    EXPECT_EQ(done.restarts(), 1);
  }

  static NetnsNetwork* net_;
  static absl::Status* network_status_;
  static v1::Checkpoint* reference_;

  std::string name_;
  std::string work_dir_;
  absl::Time started_ = absl::InfinitePast();
  std::unique_ptr<NetnsCluster> cluster_;
  std::unique_ptr<client::JobServiceClient> jobs_;
  std::vector<int> partitioned_;
  std::vector<int> delayed_;
  std::vector<int> lossy_;
  std::vector<std::string> mounts_;
};

NetnsNetwork* NetnsFaultTest::net_ = nullptr;
absl::Status* NetnsFaultTest::network_status_ = nullptr;
v1::Checkpoint* NetnsFaultTest::reference_ = nullptr;

TEST_F(NetnsFaultTest, KilledWorkerRestarts) { KillAndRestartWorker(1, /*ipv6=*/false); }

// The chief (worker/0, host 1) is killed; TF_CONFIG names every worker by its IPv6 address
// ("[fd00::2]:2222"), the coordinator is reached over IPv6 and the data plane runs over it.
TEST_F(NetnsFaultTest, KilledChiefRestartsOverIpv6) {
  KillAndRestartWorker(0, /*ipv6=*/true);
  EXPECT_THAT(ReadFile(work_dir_ + "/tf_config.0.json"), HasSubstr("[fd00::2]:2222"));
}

// Host 2 (worker/1) drops every packet for longer than the heartbeat timeout: the job is
// RESTARTING; once the network heals the same lockstepd process comes back and the job ends.
TEST_F(NetnsFaultTest, PartitionedHostRejoinsAfterTheHeartbeatTimeout) {
  const std::string id = Begin();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(net_->Partition(2).ok());
  partitioned_.push_back(2);
  const absl::Time cut = absl::Now();
  ExpectRestartingFor(id, 1, cut, "the partition");
  absl::SleepFor(absl::Seconds(1));  // the fault itself: the partition lasts a while longer
  ASSERT_TRUE(net_->Heal(2).ok());
  partitioned_.clear();
  const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
  EXPECT_EQ(done.restarts(), 1);
}

// 200 ms delay and 1% loss on host 2 for a few seconds mid-run: the job slows, needs no
// restart, and ends as promised. The delay and loss come from a userspace relay spliced into
// host 2's link (NetnsNetwork::Delay), so this runs on kernels without the netem qdisc.
TEST_F(NetnsFaultTest, DelayAndLossSlowTheJobWithoutARestart) {
  const std::string id = Begin();
  ASSERT_FALSE(id.empty());
  const int64_t healthy = StepsDuring(id, absl::Milliseconds(500), "a healthy network");
  absl::Status delayed = net_->Delay(2, absl::Milliseconds(200), /*loss_percent=*/1, /*seed=*/1,
                                     Runfile("tests/netns/delay_relay"));
  ASSERT_TRUE(delayed.ok()) << delayed;
  delayed_.push_back(2);
  // Progress arrives with the heartbeats (every kInterval): let the reports of the steps made
  // before the delay land first.
  StepsDuring(id, absl::Seconds(1), "the delay setting in");
  // Each step's all-reduce waits for host 2 at least once each way (>= 400 ms a step), so 3 s
  // under the delay make a few steps, fewer than half a second without it.
  const int64_t during = StepsDuring(id, absl::Seconds(3), "200 ms delay and 1% loss");
  EXPECT_GT(during, 0) << "the job stopped under the delay";
  EXPECT_LT(during, healthy) << "the delay did not slow the job";
  ASSERT_TRUE(net_->ClearDelay(2).ok());
  delayed_.clear();
  const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
  EXPECT_EQ(done.restarts(), 0);
}

// 2% of the packets in and out of host 2 are dropped at random (nftables, so this runs on
// kernels without netem) for a few seconds mid-run: TCP retransmits, the job slows, needs no
// restart, and ends as promised.
TEST_F(NetnsFaultTest, RandomLossSlowsTheJobWithoutARestart) {
  const std::string id = Begin();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(net_->Loss(2, 2).ok());
  lossy_.push_back(2);
  EXPECT_GT(StepsDuring(id, absl::Seconds(3), "2% loss"), 0);
  ASSERT_TRUE(net_->ClearLoss(2).ok());
  lossy_.clear();
  const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
  EXPECT_EQ(done.restarts(), 0);
}

// worker/1 is SIGSTOPped past the heartbeat timeout (a hung host), then continued.
TEST_F(NetnsFaultTest, StoppedWorkerIsContinuedAndTheJobEnds) {
  const std::string id = Begin();
  ASSERT_FALSE(id.empty());
  cluster_->worker(1)->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  ExpectRestartingFor(id, 1, stopped, "SIGSTOP");
  cluster_->worker(1)->Signal(SIGCONT);
  const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
  EXPECT_EQ(done.restarts(), 1);
}

// The coordinator is SIGKILLed mid-run and started again on the same state and address: the
// running job is re-adopted, not restarted. Its workers train on meanwhile (the data plane
// needs no coordinator), register again with their incarnations, and the same attempt ends
// as promised.
TEST_F(NetnsFaultTest, RestartedCoordinatorReadoptsTheRunningJob) {
  const std::string id = Begin();
  ASSERT_FALSE(id.empty());
  cluster_->coordinator()->Signal(SIGKILL);
  ASSERT_TRUE(cluster_->coordinator()->Wait(absl::Now() + absl::Seconds(10)).ok());
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(cluster_->StartCoordinator().ok()) << cluster_->log("coordinator.2");
  std::cerr << "[netns] " << name_ << ": coordinator back after " << absl::Now() - killed << "\n";
  const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.attempt(), 1);
}

// The chief's checkpoint directory is a small tmpfs that fills up mid-run: the chief fails
// its checkpoint, the job is RESTARTING; once space is freed it resumes and ends.
TEST_F(NetnsFaultTest, FullCheckpointDirectoryFailsTheAttemptAndTheJobResumes) {
  const std::string ckpt = work_dir_ + "/tmpfs-ckpt";
  ASSERT_EQ(mkdir(ckpt.c_str(), 0755), 0);
  ASSERT_EQ(mount("tmpfs", ckpt.c_str(), "tmpfs", 0, "size=2m"), 0) << std::strerror(errno);
  mounts_.push_back(ckpt);
  v1::JobSpec spec = RestartableJob(work_dir_);
  spec.mutable_checkpoint()->set_dir(ckpt);
  const std::string id = Begin(&spec);
  ASSERT_FALSE(id.empty());
  {
    // Fill what is left of the tmpfs.
    std::ofstream filler(work_dir_ + "/tmpfs-ckpt/filler", std::ios::binary);
    const std::string block(64 << 10, 'x');
    for (int i = 0; i < 64 && filler.write(block.data(), block.size()); ++i) {
    }
  }
  const absl::Time full = absl::Now();
  // Space is freed as soon as the first attempt has failed: that is the fault's end (the
  // next attempt backs off 0.5 s, as it failed soon after its start).
  absl::StatusOr<v1::GetJobResponse> job;
  while (absl::Now() < full + absl::Seconds(30)) {
    job = jobs_->GetJob(id);
    ASSERT_TRUE(job.ok()) << job.status();
    if (job->job().state() != v1::RUNNING || job->job().attempt() > 1) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(unlink((ckpt + "/filler").c_str()), 0);
  ASSERT_TRUE(job->job().state() != v1::RUNNING || job->job().attempt() > 1)
      << client::FormatJobDescription(*job);
  std::cerr << "[netns] " << name_ << ": attempt 1 ended " << absl::Now() - full
            << " after the disk filled\n";
  const v1::JobRecord done = ExpectSucceededAsPromised(id, ckpt);
  EXPECT_GE(done.restarts(), 1);
  // The chief's attempt failed on the full disk, and the RESTARTING reason says so (its own
  // error, not worker/1's relayed "connection closed", which may have come first).
  EXPECT_THAT(cluster_->log(cluster_->worker_log_name(0)), HasSubstr("No space left on device"));
  bool named = false;
  for (const v1::JobTransition& t : done.transitions()) {
    named = named || (t.state() == v1::RESTARTING &&
                      absl::StrContains(t.reason(), "No space left on device"));
  }
  EXPECT_TRUE(named) << done.ShortDebugString();
  for (const v1::JobTransition& t : done.transitions()) {
    if (t.state() == v1::RESTARTING) std::cerr << "[netns] " << name_ << ": " << t.reason() << "\n";
  }
}

// Both workers die; the newest checkpoint on every disk is corrupted (bytes flipped in the
// middle). The new attempt skips it, restores the one before, and ends as promised.
TEST_F(NetnsFaultTest, CorruptedNewestCheckpointFallsBackToThePreviousOne) {
  const std::string id = Begin();
  ASSERT_FALSE(id.empty());
  cluster_->worker(0)->Signal(SIGKILL);
  cluster_->worker(1)->Signal(SIGKILL);
  for (int w : {0, 1}) ASSERT_TRUE(cluster_->worker(w)->Wait(absl::Now() + absl::Seconds(10)).ok());
  std::vector<std::string> dirs = {work_dir_ + "/ckpt"};
  if (DIR* d = opendir((work_dir_ + "/worker-1/checkpoints").c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') dirs.push_back(work_dir_ + "/worker-1/checkpoints/" + e->d_name);
    }
    closedir(d);
  }
  ASSERT_EQ(dirs.size(), 2u) << "worker/1 keeps one copy of the job's checkpoints";
  int64_t newest = 0;
  for (const std::string& dir : dirs) {
    auto files = checkpoint::CheckpointManager::List(dir);
    ASSERT_TRUE(files.ok() && !files->empty()) << dir;
    const std::string path = files->front();
    auto whole = checkpoint::CheckpointManager::ReadFile(path);
    ASSERT_TRUE(whole.ok()) << whole.status();
    newest = std::max<int64_t>(newest, whole->global_step());
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    std::string middle(32, '\0');
    f.seekg(size / 2);
    f.read(middle.data(), middle.size());
    for (char& c : middle) c = static_cast<char>(~c);
    f.seekp(size / 2);
    f.write(middle.data(), middle.size());
    f.close();
    ASSERT_EQ(checkpoint::CheckpointManager::ReadFile(path).status().code(),
              absl::StatusCode::kDataLoss)
        << path;
  }
  WaitState(id, v1::RESTARTING, kTimeout + absl::Seconds(10));
  ASSERT_TRUE(cluster_->StartWorkers().ok());
  const v1::JobRecord done = ExpectSucceededAsPromised(id, work_dir_ + "/ckpt");
  std::cerr << "[netns] " << name_ << ": newest step on disk " << newest << " corrupted; attempt "
            << done.attempt() << " restored step " << done.progress().restored_step() << "\n";
  EXPECT_GT(done.progress().restored_step(), 0);
  EXPECT_LT(done.progress().restored_step(), newest);
}

}  // namespace
}  // namespace lockstep

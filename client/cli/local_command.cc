#include "client/cli/local_command.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/local_cluster.h"
#include "client/status_format.h"
#include "common/signals.h"

namespace lockstep {
namespace cli {
namespace {

// Watches SIGINT/SIGTERM (blocked in every thread) until Finish(); sets interrupted().
class SignalWatcher {
 public:
  SignalWatcher() {
    set_ = BlockSignals({SIGINT, SIGTERM});
    thread_ = std::thread([this] {
      timespec poll{0, 50 * 1000 * 1000};
      while (!done_) {
        if (sigtimedwait(&set_, nullptr, &poll) > 0) interrupted_ = true;
      }
    });
  }
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }
  bool interrupted() const { return interrupted_; }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::atomic<bool> interrupted_{false};
  std::thread thread_;
};

int RunLocal(const CommandArgs& args, const CommandContext& ctx) {
  auto workers = args.GetInt("workers", 3);
  auto cpu_devices = args.GetInt("cpu_devices", 1);
  auto timeout = args.GetDuration("timeout", absl::Seconds(30));
  auto interval = args.GetDuration("heartbeat_interval", absl::Seconds(1));
  auto hb_timeout = args.GetDuration("heartbeat_timeout", absl::Seconds(3));
  for (const absl::Status& s : {workers.status(), cpu_devices.status(), timeout.status(),
                                interval.status(), hb_timeout.status()}) {
    if (!s.ok()) {
      *ctx.err << "lockstep local: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (*workers < 1 || *workers > 256) {
    *ctx.err << "lockstep local: --workers: expected 1..256, got " << *workers << "\n";
    return kExitUsage;
  }

  client::LocalClusterOptions options;
  options.workers = *workers;
  options.cpu_devices = *cpu_devices;
  options.heartbeat_interval = *interval;
  options.heartbeat_timeout = *hb_timeout;
  options.coordinator_bin = args.Get("coordinator_bin");
  options.lockstepd_bin = args.Get("lockstepd_bin");
  options.work_dir = args.Get("work_dir");

  SignalWatcher signals;  // before any child or thread: they inherit the blocked mask
  absl::StatusOr<std::unique_ptr<client::LocalCluster>> cluster =
      client::LocalCluster::StartCoordinator(options);
  if (!cluster.ok()) {
    *ctx.err << "lockstep local: " << cluster.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << "coordinator at " << (*cluster)->coordinator_address() << "; starting " << *workers
           << " worker(s); logs in " << (*cluster)->options().work_dir << "\n";
  if (absl::Status s = (*cluster)->StartWorkers(); !s.ok()) {
    *ctx.err << "lockstep local: " << s.message() << "\n";
    return kExitFailure;
  }
  const absl::Time deadline = absl::Now() + *timeout;
  absl::StatusOr<v1::GetClusterStatusResponse> status = (*cluster)->WaitFor(
      [&](const v1::GetClusterStatusResponse& s) {
        return signals.interrupted() || client::CountInState(s, v1::ALIVE) >= *workers;
      },
      deadline, absl::Milliseconds(20));
  if (signals.interrupted()) {
    *ctx.err << "interrupted: stopping the cluster\n";
    return kExitFailure;  // ~LocalCluster stops and reaps everything
  }
  if (!status.ok()) {
    *ctx.err << "lockstep local: " << status.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << client::FormatStatusTable(*status);
  if (args.Has("keep_running")) {
    *ctx.out << "running; Ctrl-C stops the cluster. In another shell: "
             << "lockstep status --coordinator=" << (*cluster)->coordinator_address() << "\n";
    ctx.out->flush();
    while (!signals.interrupted()) absl::SleepFor(absl::Milliseconds(50));
  }
  *ctx.out << "stopping the cluster\n";
  (*cluster)->Stop();
  return kExitOk;
}

}  // namespace

Command LocalCommand() {
  Command c;
  c.name = "local";
  c.usage = "local [--workers=N] [--cpu_devices=N] [--keep_running]";
  c.summary =
      "Starts a coordinator and N workers on loopback, waits until all are ALIVE, prints "
      "the status, then stops them (or keeps them until Ctrl-C with --keep_running).";
  c.options = {
      {"workers", "Number of lockstepd to start (default 3)."},
      {"cpu_devices", "Logical CPU devices per worker (default 1)."},
      {"timeout", "How long to wait for every worker to be ALIVE (default 30s)."},
      {"heartbeat_interval", "Passed to the coordinator (default 1s)."},
      {"heartbeat_timeout", "Passed to the coordinator (default 3s)."},
      {"keep_running", "Keep the cluster up until Ctrl-C.", /*takes_value=*/false},
      {"work_dir", "Directory for port file and logs (default: a new /tmp/lockstep-cluster-*)."},
      {"coordinator_bin",
       "Path to lockstep-coordinator (default: beside this binary in bazel-bin)."},
      {"lockstepd_bin", "Path to lockstepd (default: beside this binary in bazel-bin)."},
  };
  c.run = RunLocal;
  return c;
}

}  // namespace cli
}  // namespace lockstep

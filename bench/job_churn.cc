// The coordinator's memory over many jobs: a real lockstep-coordinator process (plaintext on
// loopback) and one fake worker in this process that speaks the real protocol (registers,
// watches its assignments, reports in heartbeats). The bench submits `--jobs` tiny jobs one
// after another through the client's SubmitJob; the worker takes each partition and reports
// it DONE, so each job goes PENDING -> RUNNING -> SUCCEEDED through the real submit path and
// the real SQLite store. Every `--every` jobs it prints the coordinator's resident memory
// (VmRSS of its process) and the size of its job database; at the end, the growth from the
// first sample to the last. With --retained_jobs (the coordinator's flag, passed on) the
// coordinator keeps that many ended jobs; 0 keeps every one (memory and store then grow).
//
//   bazel build //bench:job_churn //coordinator:lockstep-coordinator
//   bazel-bin/bench/job_churn --jobs=10000 --every=1000
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "common/incarnation.h"
#include "common/net.h"
#include "common/process.h"
#include "common/protocol_version.h"
#include "common/subprocess.h"
#include "worker/grpc_worker_service_client.h"

ABSL_FLAG(int, jobs, 10000, "Jobs submitted and finished.");
ABSL_FLAG(int, every, 1000, "Sample the coordinator's memory every this many jobs.");
ABSL_FLAG(int, retained_jobs, 1000, "The coordinator's --retained_jobs (0: keep every job).");
ABSL_FLAG(std::string, coordinator_bin, "",
          "Default: <bazel-bin>/coordinator/lockstep-coordinator.");
ABSL_FLAG(std::string, work_dir, "",
          "Holds the coordinator's state_dir and log. Default: a new /tmp/lockstep-churn-*.");

namespace {

using lockstep::Subprocess;

// A field of /proc/<pid>/status in kB ("VmRSS"), or -1.
int64_t ProcStatusKb(int pid, const std::string& field) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    int64_t kb = -1;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits += c;
    }
    return absl::SimpleAtoi(digits, &kb) ? kb : -1;
  }
  return -1;
}

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

lockstep::v1::JobSpec TinyJob() {
  lockstep::v1::JobSpec spec;
  spec.set_name("churn");
  spec.set_num_workers(1);
  spec.mutable_model()->add_input_shape(8);
  spec.mutable_model()->add_layers()->mutable_dense()->set_units(4);
  spec.mutable_model()->set_loss(lockstep::v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  spec.mutable_optimizer()->mutable_sgd();
  spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
  spec.mutable_data()->mutable_train()->set_format(lockstep::v1::DataSource::SYNTHETIC);
  spec.mutable_data()->mutable_train()->set_synthetic_examples(64);
  spec.set_global_batch_size(8);
  spec.set_steps(1);
  return spec;
}

int Fail(const std::string& what, const absl::Status& status) {
  fprintf(stderr, "job_churn: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  std::string bin = absl::GetFlag(FLAGS_coordinator_bin);
  if (bin.empty()) {
    absl::StatusOr<std::string> bazel_bin = lockstep::client::BazelBinOfSelf();
    if (!bazel_bin.ok()) return Fail("--coordinator_bin", bazel_bin.status());
    bin = absl::StrCat(*bazel_bin, "/coordinator/lockstep-coordinator");
  }
  std::string dir = absl::GetFlag(FLAGS_work_dir);
  if (dir.empty()) {
    std::string tmpl = "/tmp/lockstep-churn-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return Fail("mkdtemp", absl::InternalError(tmpl));
    dir = tmpl;
  }
  lockstep::SubprocessOptions sp;
  sp.argv = {bin,
             "--insecure",
             "--host=127.0.0.1",
             "--port=0",
             absl::StrCat("--port_file=", dir, "/port"),
             absl::StrCat("--state_dir=", dir, "/state"),
             absl::StrCat("--retained_jobs=", absl::GetFlag(FLAGS_retained_jobs)),
             "--heartbeat_timeout=30s"};
  sp.log_file = absl::StrCat(dir, "/coordinator.log");
  auto coordinator = Subprocess::Start(sp);
  if (!coordinator.ok()) return Fail("start the coordinator", coordinator.status());
  absl::StatusOr<int> port =
      lockstep::WaitForPortFile(absl::StrCat(dir, "/port"), absl::Now() + absl::Seconds(10));
  if (!port.ok()) return Fail("coordinator port", port.status());
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  const lockstep::TlsOptions plain{.insecure = true};

  // The fake worker: registered, watching its assignments.
  auto worker = lockstep::worker::GrpcWorkerServiceClient::Create(address, plain);
  if (!worker.ok()) return Fail("worker client", worker.status());
  lockstep::v1::RegisterWorkerRequest reg;
  reg.set_address("127.0.0.1:1");
  reg.set_incarnation(lockstep::NewIncarnation());
  reg.set_protocol_version(lockstep::kProtocolVersion);
  reg.add_devices()->set_name("CPU:0");
  auto registered = (*worker)->RegisterWorker(reg);
  if (!registered.ok()) return Fail("RegisterWorker", registered.status());
  lockstep::v1::WatchAssignmentsRequest watch;
  *watch.mutable_task() = registered->task();
  watch.set_incarnation(reg.incarnation());
  auto assignments = (*worker)->WatchAssignments(watch);
  if (!assignments.ok()) return Fail("WatchAssignments", assignments.status());

  auto jobs = lockstep::client::JobServiceClient::Create(address, plain, absl::Seconds(30));
  if (!jobs.ok()) return Fail("job client", jobs.status());
  const lockstep::v1::JobSpec spec = TinyJob();
  const int total = absl::GetFlag(FLAGS_jobs);
  const int every = std::max(1, absl::GetFlag(FLAGS_every));
  const std::string db = absl::StrCat(dir, "/state/jobs.sqlite3");
  printf("coordinator pid %d, --retained_jobs=%d, state in %s\n", (*coordinator)->pid(),
         absl::GetFlag(FLAGS_retained_jobs), dir.c_str());
  printf("%8s %12s %12s %14s %10s\n", "jobs", "VmRSS_kB", "VmHWM_kB", "jobs.sqlite3_B", "jobs/s");
  int64_t first_rss = -1, last_rss = -1;
  absl::Time window = absl::Now();
  for (int i = 1; i <= total; ++i) {
    absl::StatusOr<std::string> id = (*jobs)->SubmitJob(spec);
    if (!id.ok()) return Fail(absl::StrCat("SubmitJob ", i), id.status());
    // Its partition, then a heartbeat reporting it DONE.
    lockstep::v1::Partition partition;
    while (true) {
      auto next = (*assignments)->Next();
      if (!next.ok() || !next->has_value()) {
        return Fail("WatchAssignments",
                    next.ok() ? absl::UnavailableError("stream ended") : next.status());
      }
      if ((*next)->has_run()) {
        partition = (*next)->run();
        break;
      }
    }
    lockstep::v1::HeartbeatRequest beat;
    *beat.mutable_task() = registered->task();
    beat.set_incarnation(reg.incarnation());
    lockstep::v1::JobReport* report = beat.add_jobs();
    report->set_job_id(partition.job_id());
    report->set_attempt(partition.attempt());
    report->set_phase(lockstep::v1::JobReport::DONE);
    report->set_step(1);
    report->set_total_steps(1);
    auto answered = (*worker)->Heartbeat(beat);
    if (!answered.ok()) return Fail("Heartbeat", answered.status());
    if (i % every == 0) {
      const int pid = (*coordinator)->pid();
      const int64_t rss = ProcStatusKb(pid, "VmRSS");
      if (first_rss < 0) first_rss = rss;
      last_rss = rss;
      const double rate = every / absl::ToDoubleSeconds(absl::Now() - window);
      window = absl::Now();
      printf("%8d %12lld %12lld %14lld %10.0f\n", i, static_cast<long long>(rss),
             static_cast<long long>(ProcStatusKb(pid, "VmHWM")),
             static_cast<long long>(FileBytes(db)), rate);
      fflush(stdout);
    }
  }
  auto listed = (*jobs)->ListJobs(0);
  if (listed.ok()) printf("jobs the coordinator still lists: %zu\n", listed->size());
  printf("VmRSS growth from %d to %d jobs: %lld kB (%lld -> %lld kB)\n", every, total,
         static_cast<long long>(last_rss - first_rss), static_cast<long long>(first_rss),
         static_cast<long long>(last_rss));
  (*assignments)->Cancel();
  (*coordinator)->Stop(absl::Seconds(5));
  return 0;
}

#include "client/cli/local_command.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cli/job_commands.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "client/status_format.h"
#include "common/secret_file.h"
#include "common/signals.h"

namespace lockstep {
namespace cli {
namespace {

constexpr char kDefaultJob[] = "examples/jobs/digits_mlp.json";

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// Where bundled files (the default job, the digits data) may be, in order: the current
// directory (tools/local.sh runs from the repository root), `bazel run`'s workspace, the
// runfiles of a test or tool that runs this binary (TEST_SRCDIR, RUNFILES_DIR: the binary's
// own runfiles tree need not exist there), and this binary's runfiles
// (bazel-bin/client/lockstep.runfiles/lockstep). The same places as BundledDataRoots.
std::vector<std::string> SearchRoots(const std::string& argv0) {
  std::vector<std::string> roots;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) roots.push_back(cwd);
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr && *ws != '\0') {
    roots.push_back(ws);
  }
  for (const char* var : {"TEST_SRCDIR", "RUNFILES_DIR"}) {
    const char* dir = std::getenv(var);
    if (dir != nullptr && *dir != '\0') roots.push_back(absl::StrCat(dir, "/lockstep"));
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) roots.push_back(absl::StrCat(std::string(self, n), ".runfiles/lockstep"));
  roots.push_back(absl::StrCat(argv0, ".runfiles/lockstep"));
  return roots;
}

// `path` as given when it exists (or is absolute), else under the first root holding it.
std::string Resolve(const std::string& path, const std::vector<std::string>& roots) {
  if (path.empty() || path[0] == '/') return path;
  for (const std::string& root : roots) {
    const std::string candidate = absl::StrCat(root, "/", path);
    if (Exists(candidate)) return candidate;
  }
  return path;
}

// Makes the job runnable from any worker directory: data files absolute, and checkpoints
// and summaries in the cluster's work_dir unless the job names its own.
void PrepareLocalJob(v1::JobSpec* spec, const std::vector<std::string>& roots,
                     const std::string& work_dir) {
  for (v1::DataSource* source :
       {spec->mutable_data()->mutable_train(), spec->mutable_data()->mutable_eval()}) {
    for (std::string& f : *source->mutable_files()) f = Resolve(f, roots);
  }
  if (!spec->data().has_eval() || spec->data().eval().files().empty()) {
    spec->mutable_data()->clear_eval();
  }
  if (spec->checkpoint().dir().empty()) {
    spec->mutable_checkpoint()->set_dir(absl::StrCat(work_dir, "/checkpoints"));
  }
  if (spec->summaries().dir().empty()) {
    spec->mutable_summaries()->set_dir(absl::StrCat(work_dir, "/summaries"));
  }
}

// Submits `spec`, follows it to the end (Ctrl-C cancels it) and prints where its results
// are. kExitOk when it SUCCEEDED.
int TrainLocal(client::LocalCluster& cluster, const v1::JobSpec& spec, const std::string& path,
               const SignalWatcher& signals, const CommandContext& ctx) {
  client::JobServiceClient& jobs = *cluster.client();
  absl::StatusOr<std::string> id = jobs.SubmitJob(spec);
  if (!id.ok()) {
    *ctx.err << "lockstep local: the coordinator refused " << path << ": " << id.status().message()
             << "\n";
    return kExitFailure;
  }
  *ctx.out << "submitted " << *id << " (" << spec.name() << ", " << path << ")\n";
  ctx.out->flush();
  std::atomic<bool> done{false};
  std::thread canceller([&] {
    while (!done) {
      if (signals.interrupted()) {
        (void)jobs.CancelJob(*id, "interrupted (Ctrl-C in lockstep local)");
        return;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  v1::JobRecord final;
  const int code =
      WatchToEnd(jobs, *id, ctx, IsTerminal(ctx), &final, [&] { return signals.interrupted(); });
  done = true;
  canceller.join();
  if (final.state() == v1::SUCCEEDED) {
    const double acc = final.progress().eval_accuracy();
    *ctx.out << "test accuracy: " << (acc >= 0 ? absl::StrCat(acc) : "not evaluated") << "\n";
  }
  return code;
}

// A client config file (client/cli/connection.h) for the running cluster, as an operator,
// mode 0600 (it holds the token): its path, or "" when the cluster is insecure or the file
// cannot be written.
std::string WriteClientConfig(const client::LocalCluster& cluster) {
  const client::LocalCredentials* credentials = cluster.credentials();
  if (credentials == nullptr) return "";
  const std::string path = absl::StrCat(credentials->dir(), "/client.config");
  const TlsOptions tls = cluster.client_tls();
  const absl::Status written =
      WritePrivateFile(path, absl::StrCat("coordinator: ", cluster.coordinator_address(),
                                          "\nca: ", tls.ca_file, "\ntoken: ", tls.token, "\n"));
  return written.ok() ? path : "";
}

// The first of workers 0..n-1 whose process has exited, or -1.
int ExitedWorker(client::LocalCluster& cluster, int n) {
  for (int w = 0; w < n; ++w) {
    Subprocess* p = cluster.worker(w);
    if (p != nullptr && !p->running()) return w;
  }
  return -1;
}

// The last non-empty line of a log file ("" when unreadable).
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

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
  if (args.positional().size() > 1) {
    *ctx.err << "lockstep local: expected at most one JOB.json\n";
    return kExitUsage;
  }
  // The job, read before anything starts so that a bad file costs nothing.
  const bool train = !args.Has("no_job");
  const std::vector<std::string> roots = SearchRoots(ctx.argv0);
  v1::JobSpec spec;
  std::string job_path;
  if (train) {
    job_path = Resolve(args.positional().empty() ? kDefaultJob : args.positional()[0], roots);
    absl::StatusOr<v1::JobSpec> parsed = client::ReadJobSpecFile(job_path);
    if (!parsed.ok()) {
      *ctx.err << "lockstep local: " << parsed.status().message() << "\n";
      return kExitUsage;
    }
    spec = std::move(*parsed);
  }

  client::LocalClusterOptions options;
  options.workers = *workers;
  options.cpu_devices = *cpu_devices;
  options.heartbeat_interval = *interval;
  options.heartbeat_timeout = *hb_timeout;
  options.coordinator_bin = args.Get("coordinator_bin");
  options.lockstepd_bin = args.Get("lockstepd_bin");
  options.work_dir = args.Get("work_dir");
  options.pin_workers = args.Has("pin_workers");
  options.insecure = args.Has("insecure");
  if (args.Has("gpus")) {
    // Every worker offers this host's GPUs, and the job asks for GPU replicas.
    options.gpus = "all";
    spec.set_gpus(true);
  }
  // The job's data may be anywhere on this machine: its directories are data roots too.
  for (const v1::DataSource& source : {spec.data().train(), spec.data().eval()}) {
    for (const std::string& f : source.files()) {
      char real[PATH_MAX];
      if (realpath(Resolve(f, roots).c_str(), real) == nullptr) continue;  // the job says
      const std::string file(real);
      options.data_roots.push_back(file.substr(0, std::max<size_t>(1, file.rfind('/'))));
    }
  }
  if (options.insecure) {
    *ctx.err << "warning: --insecure: the local cluster runs plaintext gRPC with no "
                "authentication and no authorization\n";
  }

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
        return signals.interrupted() || client::CountInState(s, v1::ALIVE) >= *workers ||
               ExitedWorker(**cluster, *workers) >= 0;
      },
      deadline, absl::Milliseconds(20));
  if (signals.interrupted()) {
    *ctx.err << "interrupted: stopping the cluster\n";
    return kExitFailure;  // ~LocalCluster stops and reaps everything
  }
  if (const int w = ExitedWorker(**cluster, *workers); w >= 0) {
    // A worker that cannot start (a bad flag, --gpus without a usable GPU) says why in its log.
    const std::string log = absl::StrCat((*cluster)->options().work_dir, "/lockstepd.", w, ".log");
    *ctx.err << "lockstep local: worker " << w << " exited while starting: " << LastLine(log)
             << "\n(its log: " << log << ")\n";
    return kExitFailure;
  }
  if (!status.ok()) {
    *ctx.err << "lockstep local: " << status.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << client::FormatStatusTable(*status);
  int exit_code = kExitOk;
  if (train) {
    PrepareLocalJob(&spec, roots, (*cluster)->options().work_dir);
    exit_code = TrainLocal(**cluster, spec, job_path, signals, ctx);
  }
  if (args.Has("keep_running")) {
    const std::string config = WriteClientConfig(**cluster);
    *ctx.out << "running; Ctrl-C stops the cluster. In another shell: lockstep status "
             << (config.empty()
                     ? absl::StrCat("--insecure --coordinator=", (*cluster)->coordinator_address())
                     : absl::StrCat("--config=", config))
             << "\n";
    ctx.out->flush();
    while (!signals.interrupted()) absl::SleepFor(absl::Milliseconds(50));
  }
  *ctx.out << "stopping the cluster\n";
  (*cluster)->Stop();
  return exit_code;
}

}  // namespace

Command LocalCommand() {
  Command c;
  c.name = "local";
  c.usage =
      "local [--workers=N] [--cpu_devices=N] [--gpus] [--pin_workers] [--keep_running] [--no_job] "
      "[JOB.json]";
  c.summary =
      "Starts a coordinator and N workers on loopback, trains JOB.json on them (default "
      "examples/jobs/digits_mlp.json: the bundled digits MLP, MultiWorkerMirrored) showing "
      "its progress, prints the test accuracy and where the checkpoints and summaries are, "
      "then stops them (or keeps them until Ctrl-C with --keep_running).";
  c.options = {
      {"workers", "Number of lockstepd to start (default 3)."},
      {"cpu_devices", "Logical CPU devices per worker (default 1)."},
      {"gpus",
       "Train on GPUs: every worker offers this host's GPUs (lockstepd --gpus=all, each worker "
       "its own NCCL_HOSTID so that they can share one GPU) and the job asks for GPU replicas "
       "(JobSpec.gpus). Needs a --config=cuda build and a GPU.",
       /*takes_value=*/false},
      {"timeout", "How long to wait for every worker to be ALIVE (default 30s)."},
      {"heartbeat_interval", "Passed to the coordinator (default 1s)."},
      {"heartbeat_timeout", "Passed to the coordinator (default 3s)."},
      {"pin_workers",
       "Give each worker cpu_devices CPUs of its own (lockstepd --cpu_affinity) when there are "
       "enough for every worker (default: workers run on any CPU).",
       /*takes_value=*/false},
      {"keep_running", "Keep the cluster up until Ctrl-C.", /*takes_value=*/false},
      {"insecure",
       "Plaintext gRPC, no authentication or authorization (default: TLS with a throwaway "
       "CA, certificates and tokens in the work dir's tls/).",
       /*takes_value=*/false},
      {"no_job", "Only bring the cluster up (and show its status); train nothing.",
       /*takes_value=*/false},
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

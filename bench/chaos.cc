// Chaos: a job of N workers (the digits MLP, checkpoints every --checkpoint_every steps,
// restarts allowed) trains for --duration while a random worker is SIGKILLed every
// --kill_min..--kill_max and started again at once (a supervisor such as systemd's
// Restart=always or a Kubernetes StatefulSet replacing it). For every failure it prints
// the time to detection (kill -> RESTARTING), to the new attempt (-> RUNNING), to its first
// new step, and the steps redone; at the end the restarts and the goodput: the wall time
// less what each failure cost (kill to first new step, plus the steps redone at the
// undisturbed rate), over the wall time.
// Goals (the failures issue): goodput >= 90% at one failure a minute; recovery (kill to the
// first new step) <= heartbeat timeout + 2 s.
//
//   bazel build -c opt //bench:chaos //coordinator:lockstep-coordinator //worker:lockstepd
//   bazel-bin/bench/chaos --duration=300s --kill_min=10s --kill_max=30s
//
// Progress is read from the coordinator (the chief's reports ride on heartbeats, every
// --heartbeat_interval), so each time below is late by up to one interval; the step at a
// kill is extrapolated from the last report at the undisturbed rate.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_cluster.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "common/process.h"

ABSL_FLAG(int, workers, 3, "lockstepd processes; the job runs on all of them.");
ABSL_FLAG(absl::Duration, duration, absl::Minutes(5), "How long the job trains under fire.");
ABSL_FLAG(absl::Duration, kill_min, absl::Seconds(10), "Least time between two kills.");
ABSL_FLAG(absl::Duration, kill_max, absl::Seconds(30), "Most time between two kills.");
ABSL_FLAG(int64_t, checkpoint_every, 1000, "checkpoint.every_steps of the job.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Milliseconds(250), "Workers' heartbeats.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(3), "A silent worker is LOST after.");
ABSL_FLAG(uint64_t, seed, 1, "Chooses the victims and the intervals.");
ABSL_FLAG(std::string, job, "examples/jobs/digits_mlp.json", "The job spec.");
ABSL_FLAG(std::string, data, "examples/data/digits.csv.gz", "Its training file.");

namespace lockstep {
namespace {

// The chief's latest progress as the coordinator has it.
struct Seen {
  absl::Time at;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  int attempt = 0;
  int64_t step = 0;
  int64_t restored = 0;
};

struct Failure {
  int worker = 0;
  absl::Duration detected, running, first_step;  // since the kill
  int64_t redone = 0;
  int64_t restored = 0;
};

absl::StatusOr<Seen> Look(client::JobServiceClient& jobs, const std::string& id) {
  absl::StatusOr<v1::GetJobResponse> job = jobs.GetJob(id);
  if (!job.ok()) return job.status();
  return Seen{absl::Now(), job->job().state(), job->job().attempt(), job->job().progress().step(),
              job->job().progress().restored_step()};
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run() {
  client::LocalClusterOptions o = bench::BenchClusterOptions(absl::GetFlag(FLAGS_workers));
  o.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  o.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  o.static_tf_config = true;  // a restarted lockstepd claims its task again
  // The workers take a relative path under their data roots: give them this one's, and its
  // directory as a root.
  const std::filesystem::path data = std::filesystem::weakly_canonical(absl::GetFlag(FLAGS_data));
  o.data_roots.push_back(data.parent_path().string());
  std::unique_ptr<client::LocalCluster> started = bench::StartBenchCoordinator(o);
  if (started == nullptr) return 1;
  client::LocalCluster& cluster = *started;
  if (absl::Status s = cluster.StartWorkers(); !s.ok()) {
    fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  if (auto s = cluster.WaitForAlive(o.workers, absl::Now() + absl::Seconds(30)); !s.ok()) {
    fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(absl::GetFlag(FLAGS_job));
  if (!spec.ok()) {
    fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  spec->mutable_data()->mutable_train()->set_files(0, data.string());
  spec->set_epochs(0);
  spec->set_steps(int64_t{1} << 40);
  spec->set_eval_every_steps(0);
  spec->set_num_workers(o.workers);
  spec->mutable_checkpoint()->set_dir(cluster.options().work_dir + "/ckpt");
  spec->mutable_checkpoint()->set_every_steps(absl::GetFlag(FLAGS_checkpoint_every));
  spec->clear_summaries();
  spec->mutable_restart_policy()->set_max_restarts(1000000);
  client::JobServiceClient& jobs = *cluster.client();
  absl::StatusOr<std::string> id = jobs.SubmitJob(*spec);
  if (!id.ok()) {
    fprintf(stderr, "%s\n", id.status().ToString().c_str());
    return 1;
  }

  // Undisturbed rate: the first 10 s of training after the first report.
  absl::StatusOr<Seen> first;
  do {
    absl::SleepFor(absl::Milliseconds(20));
    first = Look(jobs, *id);
    if (!first.ok()) {
      fprintf(stderr, "%s\n", first.status().ToString().c_str());
      return 1;
    }
  } while (first->step == 0);
  absl::SleepFor(absl::Seconds(10));
  absl::StatusOr<Seen> warm = Look(jobs, *id);
  if (!warm.ok() || warm->attempt != 1) {
    fprintf(stderr, "the job did not train undisturbed for 10 s\n");
    return 1;
  }
  const double steps_per_sec =
      static_cast<double>(warm->step - first->step) / absl::ToDoubleSeconds(warm->at - first->at);
  printf(
      "job %s on %d workers: %.0f steps/s undisturbed (checkpoint every %lld steps, "
      "heartbeat %s / timeout %s)\n",
      id->c_str(), o.workers, steps_per_sec,
      static_cast<long long>(absl::GetFlag(FLAGS_checkpoint_every)),
      absl::FormatDuration(o.heartbeat_interval).c_str(),
      absl::FormatDuration(o.heartbeat_timeout).c_str());

  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  const absl::Duration kill_min = absl::GetFlag(FLAGS_kill_min);
  const absl::Duration kill_max = std::max(kill_min, absl::GetFlag(FLAGS_kill_max));
  const absl::Time start = warm->at;
  const int64_t start_step = warm->step;
  const absl::Time end = start + absl::GetFlag(FLAGS_duration);
  std::vector<Failure> failures;
  Seen last = *warm;
  while (true) {
    std::uniform_real_distribution<double> gap(absl::ToDoubleSeconds(kill_min),
                                               absl::ToDoubleSeconds(kill_max));
    const absl::Time kill_at = absl::Now() + absl::Seconds(gap(rng));
    if (kill_at >= end) break;
    while (absl::Now() < kill_at) {
      absl::SleepFor(absl::Milliseconds(20));
      if (absl::StatusOr<Seen> s = Look(jobs, *id); s.ok()) last = *s;
    }
    if (last.state != v1::RUNNING) {
      fprintf(stderr, "the job is %s before the kill: %s\n", v1::JobState_Name(last.state).c_str(),
              client::FormatJobDescription(*jobs.GetJob(*id)).c_str());
      return 1;
    }
    Failure f;
    f.worker = static_cast<int>(rng() % o.workers);
    const absl::Time killed = absl::Now();
    const int64_t step_at_kill =
        last.step + static_cast<int64_t>(absl::ToDoubleSeconds(killed - last.at) * steps_per_sec);
    cluster.worker(f.worker)->Signal(SIGKILL);
    (void)cluster.worker(f.worker)->Wait(killed + absl::Seconds(10));
    if (absl::Status s = cluster.StartWorker(f.worker); !s.ok()) {
      fprintf(stderr, "restarting worker/%d: %s\n", f.worker, s.ToString().c_str());
      return 1;
    }
    const int attempt = last.attempt;
    bool restarting = false, running = false;
    while (absl::Now() < killed + absl::Seconds(60)) {
      absl::SleepFor(absl::Milliseconds(5));
      absl::StatusOr<Seen> s = Look(jobs, *id);
      if (!s.ok()) continue;
      last = *s;
      if (!restarting && (s->state == v1::RESTARTING || s->attempt > attempt)) {
        restarting = true;
        f.detected = s->at - killed;
      }
      if (!running && s->state == v1::RUNNING && s->attempt > attempt) {
        running = true;
        f.running = s->at - killed;
      }
      if (running && s->restored > 0 && s->step > s->restored) {
        f.first_step = s->at - killed;
        f.restored = s->restored;
        f.redone = std::max<int64_t>(0, step_at_kill - s->restored);
        break;
      }
    }
    if (f.first_step == absl::ZeroDuration()) {
      fprintf(stderr, "worker/%d killed: the job did not train again within 60 s:\n%s\n", f.worker,
              client::FormatJobDescription(*jobs.GetJob(*id)).c_str());
      return 1;
    }
    printf(
        "kill %zu: worker/%d at ~step %lld: RESTARTING after %.2f s, RUNNING after %.2f s, "
        "first new step after %.2f s (restored step %lld, %lld steps redone)\n",
        failures.size() + 1, f.worker, static_cast<long long>(step_at_kill),
        absl::ToDoubleSeconds(f.detected), absl::ToDoubleSeconds(f.running),
        absl::ToDoubleSeconds(f.first_step), static_cast<long long>(f.restored),
        static_cast<long long>(f.redone));
    fflush(stdout);
    failures.push_back(f);
  }
  while (absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(20));
    if (absl::StatusOr<Seen> s = Look(jobs, *id); s.ok()) last = *s;
  }
  const double wall = absl::ToDoubleSeconds(last.at - start);
  const double useful = static_cast<double>(last.step - start_step) / steps_per_sec;
  std::vector<double> recovery, lost;
  for (const Failure& f : failures) {
    recovery.push_back(absl::ToDoubleSeconds(f.first_step));
    lost.push_back(absl::ToDoubleSeconds(f.first_step) + f.redone / steps_per_sec);
  }
  printf("%zu failures in %.0f s (%.2f a minute), %d restarts recorded\n", failures.size(), wall,
         failures.size() * 60.0 / wall, jobs.GetJob(*id)->job().restarts());
  printf("recovery (kill to first new step): median %.2f s, max %.2f s (goal <= %.1f s)\n",
         Median(recovery),
         recovery.empty() ? 0.0 : *std::max_element(recovery.begin(), recovery.end()),
         absl::ToDoubleSeconds(o.heartbeat_timeout) + 2);
  double lost_total = 0;
  for (double l : lost) lost_total += l;
  printf("time lost per failure (recovery + steps redone): median %.2f s, %.1f s in all\n",
         Median(lost), lost_total);
  printf("goodput: %.1f%% of the wall time trained steps that counted (1 - time lost / wall)\n",
         100.0 * (1 - lost_total / wall));
  printf(
      "cross-check at the first 10 s' rate: %lld steps in %.0f s = %.0f s undisturbed "
      "(%.1f%%; low when the machine's load changed)\n",
      static_cast<long long>(last.step - start_step), wall, useful, 100.0 * useful / wall);
  (void)jobs.CancelJob(*id, "chaos bench finished");
  cluster.Stop();
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  return lockstep::Run();
}

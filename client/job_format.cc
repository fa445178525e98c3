#include "client/job_format.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/terminal_text.h"
#include "google/protobuf/util/json_util.h"

namespace lockstep {
namespace client {
namespace {

std::string Age(int64_t unix_micros, absl::Time now) {
  if (unix_micros == 0) return "-";
  const absl::Duration d = now - absl::FromUnixMicros(unix_micros);
  if (d < absl::Minutes(1)) return absl::StrCat(absl::ToInt64Seconds(d), "s");
  if (d < absl::Hours(1)) return absl::StrCat(absl::ToInt64Minutes(d), "m");
  if (d < absl::Hours(48)) return absl::StrCat(absl::ToInt64Hours(d), "h");
  return absl::StrCat(absl::ToInt64Hours(d) / 24, "d");
}

std::string Accuracy(double a) { return a < 0 ? "-" : absl::StrFormat("%.4f", a); }

std::string Clip(const std::string& s, size_t n) {
  return s.size() <= n ? s : absl::StrCat(s.substr(0, n - 3), "...");
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

// "1.7 GiB", "312.0 MiB", "4.0 KiB", "100 B".
std::string Bytes(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  const double b = static_cast<double>(bytes);
  if (bytes >= kGiB) return absl::StrFormat("%.1f GiB", b / kGiB);
  if (bytes >= kMiB) return absl::StrFormat("%.1f MiB", b / kMiB);
  if (bytes >= kKiB) return absl::StrFormat("%.1f KiB", b / kKiB);
  return absl::StrCat(bytes, " B");
}

// One GPU's memory figures and whose they are.
struct GpuMemoryAt {
  int rank = 0;
  const v1::DeviceMemory* memory = nullptr;

  std::string Where() const { return absl::StrCat("rank ", rank, " ", memory->device()); }
};

// "GPU memory: peak 1.7 GiB (rank 0 /gpu:0), reserved 2.0 GiB (rank 1 /gpu:0)\n": the largest
// peak and the largest reservation among the job's GPUs, from every worker's latest report
// (the chief's, kept in the job's progress, when the coordinator holds no reports); "" for
// a CPU job.
std::string GpuMemoryLine(const v1::GetJobResponse& r) {
  std::vector<GpuMemoryAt> gpus;
  for (int rank = 0; rank < r.workers_size(); ++rank) {
    for (const v1::DeviceMemory& m : r.workers(rank).device_memory()) gpus.push_back({rank, &m});
  }
  if (gpus.empty()) {
    for (const v1::DeviceMemory& m : r.job().progress().device_memory()) gpus.push_back({0, &m});
  }
  if (gpus.empty()) return "";
  const GpuMemoryAt& peak =
      *std::max_element(gpus.begin(), gpus.end(), [](const GpuMemoryAt& a, const GpuMemoryAt& b) {
        return a.memory->peak_bytes() < b.memory->peak_bytes();
      });
  const GpuMemoryAt& reserved =
      *std::max_element(gpus.begin(), gpus.end(), [](const GpuMemoryAt& a, const GpuMemoryAt& b) {
        return a.memory->reserved_bytes() < b.memory->reserved_bytes();
      });
  return absl::StrCat("GPU memory: peak ", Bytes(peak.memory->peak_bytes()), " (", peak.Where(),
                      "), reserved ", Bytes(reserved.memory->reserved_bytes()), " (",
                      reserved.Where(), ")\n");
}

std::string Ms(int64_t ms) { return absl::FormatDuration(absl::Milliseconds(ms)); }

// The plan's decisions (job_plan.proto), a few lines under "Plan:"; `spec` only says where
// a decision came from (AUTO, a default).
std::string FormatPlan(const v1::JobPlan& p, const v1::JobSpec& spec) {
  const v1::DevicePlan& d = p.devices();
  const std::string kind = d.kind() == v1::DevicePlan::GPU ? "GPU" : "CPU";
  std::string out = absl::StrCat(
      "Plan:      version ", p.version(), ", ", v1::StrategyKind_Name(p.strategy()), " on ",
      p.workers() > 0 ? absl::StrCat(p.workers(), " worker(s)") : "every ALIVE training worker",
      "\n");
  absl::StrAppend(&out, "  replicas:      ",
                  d.per_worker() > 0 ? absl::StrCat(d.per_worker(), " ", kind, " per worker")
                                     : absl::StrCat("one per ", kind, " device of each worker"),
                  "\n");
  const v1::CommunicationPlan& c = p.communication();
  const v1::CommunicationSpec::Implementation asked = spec.communication().implementation();
  absl::StrAppend(&out, "  communication: ", v1::CommunicationPlan::Backend_Name(c.backend()),
                  asked == v1::CommunicationSpec::AUTO ||
                          asked == v1::CommunicationSpec::IMPLEMENTATION_UNSPECIFIED
                      ? " (from AUTO)"
                      : "",
                  ", packs ", Bytes(c.bytes_per_pack()), ", timeout ", Ms(c.timeout_ms()),
                  c.hierarchical() ? ", hierarchical" : ", flat", c.encrypt() ? ", encrypted" : "",
                  c.bf16_compression() ? ", bf16 compression" : "",
                  c.shm_heap() ? "" : ", no shm heap", "\n");
  const v1::CheckpointPlan& k = p.checkpoint();
  absl::StrAppend(
      &out, "  checkpoints:   ",
      k.every_steps() > 0 ? absl::StrCat("every ", k.every_steps(), " steps") : "at the end only",
      ", keep ", k.keep(), ", ",
      k.copies() > 0 ? absl::StrCat("a copy on ", k.copies(), " worker(s)")
                     : "a copy on every worker",
      "\n");
  const v1::InputPlan& in = p.input();
  std::string eval = "none";
  if (in.eval() == v1::InputPlan::SOURCE) eval = "data.eval";
  if (in.eval() == v1::InputPlan::HELD_OUT) {
    eval = absl::StrFormat("%g of data.train held out", in.eval_fraction());
  }
  absl::StrAppend(&out, "  input:         eval ", eval, ", sharding ",
                  v1::AutoShardPolicy_Name(in.auto_shard_policy()),
                  in.shuffle() ? ", shuffled" : ", not shuffled", "; summaries every ",
                  p.summary_every_steps(), " steps\n");
  const v1::RestartPlan& r = p.restart();
  absl::StrAppend(&out, "  restarts:      ", r.max_restarts(), " allowed");
  if (r.min_workers() > 0) {
    absl::StrAppend(
        &out, "; elastic: at least ", r.min_workers(), " workers, at most ",
        r.max_workers() > 0 ? absl::StrCat(r.max_workers()) : "every ALIVE training worker",
        ", replacement timeout ", Ms(r.replacement_timeout_ms()));
  }
  absl::StrAppend(&out, "\n");
  return out;
}

}  // namespace

bool JobEnded(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

absl::StatusOr<v1::JobSpec> ParseJobSpecJson(absl::string_view json, absl::string_view source) {
  v1::JobSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &spec, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a valid job spec: ", std::string(status.message())));
  }
  return spec;
}

absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the job file"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobSpecJson(text.str(), path);
}

std::string FormatJobsTable(const std::vector<v1::JobRecord>& jobs, absl::Time now) {
  std::string out =
      absl::StrFormat("%-11s %-16s %-9s %7s %12s %8s %8s %5s  %s\n", "ID", "NAME", "STATE",
                      "ATTEMPT", "STEP", "LOSS", "EVAL_ACC", "AGE", "REASON");
  for (const v1::JobRecord& j : jobs) {
    const v1::JobProgress& p = j.progress();
    const std::string step =
        p.total_steps() > 0 ? absl::StrCat(p.step(), "/", p.total_steps()) : absl::StrCat(p.step());
    const bool has_progress = p.unix_micros() != 0;
    absl::StrAppend(&out, absl::StrFormat("%-11s %-16s %-9s %7d %12s %8s %8s %5s  %s\n", j.id(),
                                          Clip(j.name(), 16), v1::JobState_Name(j.state()),
                                          j.attempt(), has_progress ? step : "-",
                                          has_progress ? absl::StrFormat("%.4f", p.loss()) : "-",
                                          has_progress ? Accuracy(p.eval_accuracy()) : "-",
                                          Age(j.created_unix_micros(), now), Clip(j.reason(), 60)));
  }
  absl::StrAppend(&out, jobs.size(), jobs.size() == 1 ? " job\n" : " jobs\n");
  return EscapeForTerminal(out);  // reasons, errors and verdicts carry workers' text
}

std::string FormatJobResult(const v1::JobRecord& job) {
  const v1::JobProgress& p = job.progress();
  std::string out = absl::StrCat("job ", job.id(), " ", v1::JobState_Name(job.state()));
  if (!job.reason().empty()) absl::StrAppend(&out, ": ", job.reason());
  absl::StrAppend(&out, "\n");
  if (p.unix_micros() != 0) {
    absl::StrAppend(&out, absl::StrFormat("  steps %d/%d, epoch %d, loss %.4f, train accuracy %s, "
                                          "test accuracy %s, %.0f examples/s\n",
                                          p.step(), p.total_steps(), p.epoch(), p.loss(),
                                          Accuracy(p.train_accuracy()), Accuracy(p.eval_accuracy()),
                                          p.examples_per_sec()));
    if (p.step_ms() > 0) {
      absl::StrAppend(
          &out, absl::StrFormat("  step %.2f ms: compute %.2f, all-reduce wait %.2f, "
                                "apply %.2f\n",
                                p.step_ms(), p.compute_ms(), p.allreduce_wait_ms(), p.apply_ms()));
    }
  }
  if (!p.checkpoint_path().empty())
    absl::StrAppend(&out, "  checkpoint: ", p.checkpoint_path(), "\n");
  if (!p.summary_dir().empty()) {
    absl::StrAppend(&out, "  summaries:  ", p.summary_dir(), "  (tensorboard --logdir ",
                    p.summary_dir(), ")\n");
  }
  return EscapeForTerminal(out);  // reasons, errors and verdicts carry workers' text
}

std::string FormatJobDescription(const v1::GetJobResponse& r) {
  const v1::JobRecord& j = r.job();
  std::string out = absl::StrCat("Job:       ", j.id(), " (", j.name(), ")\n",
                                 "State:     ", v1::JobState_Name(j.state()), "\n");
  if (!j.reason().empty()) absl::StrAppend(&out, "Reason:    ", j.reason(), "\n");
  const int max_restarts = r.plan().restart().max_restarts();
  absl::StrAppend(&out, "Attempt:   ", j.attempt(),
                  max_restarts > 0 ? absl::StrCat(" (restarts: ", j.restarts(), " of ",
                                                  max_restarts, " allowed)")
                                   : "",
                  "\n");
  if (j.progress().restored_step() > 0) {
    absl::StrAppend(&out, "Restored:  from the checkpoint of step ", j.progress().restored_step(),
                    "\n");
  }
  absl::StrAppend(&out, "Batch:     ", r.spec().global_batch_size(), " (global)\n",
                  "Created:   ", absl::FormatTime(absl::FromUnixMicros(j.created_unix_micros())),
                  "\n");
  absl::StrAppend(&out, r.has_plan() ? FormatPlan(r.plan(), r.spec())
                                     : "Plan:      none (a job stored before job plans)\n");
  absl::StrAppend(&out, GpuMemoryLine(r));
  absl::StrAppend(&out, "Progress:\n  ", FormatJobResult(j));
  absl::StrAppend(&out, "Transitions:\n");
  for (const v1::JobTransition& t : j.transitions()) {
    absl::StrAppend(&out, "  ",
                    absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixMicros(t.unix_micros()),
                                     absl::LocalTimeZone()),
                    "  ", v1::JobState_Name(t.state()), " (attempt ", t.attempt(), ")",
                    t.reason().empty() ? "" : absl::StrCat(": ", t.reason()), "\n");
  }
  if (r.workers_size() > 0) {
    // Per step, in milliseconds: the whole step, then its compute, its wait for all-reduces
    // the backward pass did not hide, and the optimizer's update. The worker the others wait
    // for has the longest compute and the shortest wait.
    absl::StrAppend(&out, "Workers:\n",
                    absl::StrFormat("  %-5s %-9s %10s %8s %10s %8s %8s %8s %8s %8s  %s\n", "RANK",
                                    "PHASE", "STEP", "LOSS", "EX/S", "BUSBW", "STEP_MS", "COMPUTE",
                                    "AR_WAIT", "APPLY", "ERROR"));
    for (int i = 0; i < r.workers_size(); ++i) {
      const v1::JobReport& w = r.workers(i);
      absl::StrAppend(
          &out, absl::StrFormat("  %-5d %-9s %10d %8.4f %10.0f %8.2f %8.2f %8.2f %8.2f %8.2f  %s\n",
                                i, v1::JobReport::Phase_Name(w.phase()), w.step(), w.loss(),
                                w.examples_per_sec(), w.busbw_gbps(), w.step_ms(), w.compute_ms(),
                                w.allreduce_wait_ms(), w.apply_ms(), w.error()));
    }
  }
  if (r.has_evaluator_task()) {
    const v1::JobReport& e = r.evaluator();
    absl::StrAppend(&out, "Evaluator: ", r.evaluator_task().type(), "/", r.evaluator_task().index(),
                    " ", v1::JobReport::Phase_Name(e.phase()), ", ", e.checkpoints_evaluated(),
                    " checkpoints evaluated");
    if (e.checkpoints_evaluated() > 0) {
      absl::StrAppend(&out, absl::StrFormat(", newest: step %d, eval loss %.4f, accuracy %.4f",
                                            e.step(), e.loss(), e.eval_accuracy()));
    }
    if (!e.summary_dir().empty()) absl::StrAppend(&out, ", summaries in ", e.summary_dir());
    if (!e.error().empty()) absl::StrAppend(&out, "; ", e.error());
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, FormatDiagnosis(r.diagnosis(), ""));
  return EscapeForTerminal(out);  // reasons, errors and verdicts carry workers' text
}

std::string FormatDiagnosis(const v1::JobDiagnosis& d, const std::string& prefix) {
  std::string out;
  if (!d.hang_verdict().empty()) {
    absl::StrAppend(&out, prefix, "HANG:      ", d.hang_verdict(), " (lockstep dump ", d.job_id(),
                    " shows every rank's flight record)\n");
  }
  for (const std::string& s : d.stragglers()) {
    absl::StrAppend(&out, prefix, "STRAGGLER: ", s, "\n");
  }
  return EscapeForTerminal(out);  // reasons, errors and verdicts carry workers' text
}

std::string FormatEventLine(const v1::JobEvent& event) {
  const v1::JobRecord& j = event.job();
  const v1::JobProgress& p = j.progress();
  std::string out = absl::StrCat(j.id(), " ", v1::JobState_Name(j.state()));
  if (p.unix_micros() != 0) {
    absl::StrAppend(&out,
                    absl::StrFormat(" step %d/%d loss %.4f", p.step(), p.total_steps(), p.loss()));
    if (p.eval_accuracy() >= 0) absl::StrAppend(&out, " test_acc ", Accuracy(p.eval_accuracy()));
    absl::StrAppend(&out, absl::StrFormat(" %.0f ex/s", p.examples_per_sec()));
  }
  if (!event.message().empty() &&
      (p.unix_micros() == 0 || JobEnded(j.state()) || event.message().rfind("step ", 0) != 0)) {
    absl::StrAppend(&out, "  ", event.message());
  }
  return EscapeForTerminal(out);  // reasons, errors and verdicts carry workers' text
}

std::string FormatProgressBar(const v1::JobProgress& p, double eta_seconds, int width) {
  const double frac =
      p.total_steps() > 0 ? std::min(1.0, static_cast<double>(p.step()) / p.total_steps()) : 0.0;
  const int filled = static_cast<int>(frac * width + 0.5);
  std::string bar =
      absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
  absl::StrAppend(&bar, absl::StrFormat(" %d/%d loss %.4f %.0f ex/s ETA %s", p.step(),
                                        p.total_steps(), p.loss(), p.examples_per_sec(),
                                        eta_seconds < 0 ? "-:--" : Duration(eta_seconds)));
  return bar;
}

namespace {

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message,
                                          bool add_whitespace) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = add_whitespace;
  options.preserve_proto_field_names = false;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot print ", message.GetTypeName(),
                                            " as JSON: ", status.message().as_string()));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  return MessageToJson(message, /*add_whitespace=*/true);
}

absl::StatusOr<std::string> ToJsonLine(const google::protobuf::Message& message) {
  return MessageToJson(message, /*add_whitespace=*/false);
}

}  // namespace client
}  // namespace lockstep

#include "client/cli/job_commands.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/connection.h"
#include "client/job_format.h"
#include "client/terminal_text.h"

namespace lockstep {
namespace cli {
namespace {

const OptionSpec kOutputOption = {"output", "table (default) or json (the proto's JSON mapping)."};

// `options` after ConnectionOptions().
std::vector<OptionSpec> WithConnection(std::vector<OptionSpec> options) {
  std::vector<OptionSpec> all = ConnectionOptions();
  all.insert(all.end(), options.begin(), options.end());
  return all;
}

// Checks --output; false (after printing why) when it is neither table nor json.
bool JsonOutput(const CommandArgs& args, const CommandContext& ctx, const std::string& command,
                bool* ok) {
  const std::string output = args.Get("output", "table");
  *ok = output == "table" || output == "json";
  if (!*ok) {
    *ctx.err << "lockstep " << command << ": --output: expected table or json, got \"" << output
             << "\"\n";
  }
  return output == "json";
}

// One message as JSON: indented, or on one line (JSON lines, for streams).
int PrintJson(const google::protobuf::Message& m, const CommandContext& ctx,
              bool one_line = false) {
  absl::StatusOr<std::string> json = one_line ? client::ToJsonLine(m) : client::ToJson(m);
  if (!json.ok()) {
    *ctx.err << json.status().message() << "\n";
    return kExitFailure;
  }
  *ctx.out << *json << "\n";
  ctx.out->flush();
  return kExitOk;
}

// WatchToEnd as JSON lines (--output=json): one JobEvent per line while the job has not
// ended, then its final JobRecord on one line. Specs are left out (`describe` shows
// them); errors go to ctx.err, so ctx.out holds JSON only.
int WatchToEndAsJson(client::JobServiceClient& jobs, const std::string& id,
                     const CommandContext& ctx) {
  bool print_failed = false;
  absl::StatusOr<v1::JobEvent> last = jobs.WatchJob(
      id,
      [&](const v1::JobEvent& e) {
        if (client::JobEnded(e.job().state())) return;  // the final record follows
        v1::JobEvent line = e;
        line.mutable_job()->clear_spec();
        print_failed |= PrintJson(line, ctx, /*one_line=*/true) != kExitOk;
      },
      absl::InfiniteFuture());
  if (!last.ok()) {
    *ctx.err << "lockstep watch: " << client::EscapeForTerminal(last.status().message()) << "\n";
    return kExitFailure;
  }
  v1::JobRecord final = last->job();
  final.clear_spec();
  if (PrintJson(final, ctx, /*one_line=*/true) != kExitOk || print_failed) return kExitFailure;
  return final.state() == v1::SUCCEEDED ? kExitOk : kExitFailure;
}

int RunSubmit(const CommandArgs& args, const CommandContext& ctx) {
  if (args.positional().size() != 1) {
    *ctx.err << "lockstep submit: expected one JOB.json\n";
    return kExitUsage;
  }
  bool output_ok;
  const bool json = JsonOutput(args, ctx, "submit", &output_ok);
  if (!output_ok) return kExitUsage;
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(args.positional()[0]);
  if (!spec.ok()) {
    *ctx.err << "lockstep submit: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  auto jobs = Connect(args, ctx, "submit");
  if (jobs == nullptr) return kExitUsage;
  absl::StatusOr<std::string> id = jobs->SubmitJob(*spec);
  if (!id.ok()) {
    *ctx.err << "lockstep submit: the coordinator refused " << args.positional()[0] << ": "
             << id.status().message() << "\n";
    return kExitFailure;
  }
  const bool watch = args.Has("watch");
  if (json) {
    v1::SubmitJobResponse r;
    r.set_job_id(*id);
    // With --watch, JSON lines: this line, the watch's events, the final record.
    PrintJson(r, ctx, /*one_line=*/watch);
  } else {
    *ctx.out << "submitted " << *id << "\n";
  }
  if (!watch) return kExitOk;
  if (json) return WatchToEndAsJson(*jobs, *id, ctx);
  return WatchToEnd(*jobs, *id, ctx, IsTerminal(ctx));
}

int RunWatch(const CommandArgs& args, const CommandContext& ctx) {
  bool output_ok;
  const bool json = JsonOutput(args, ctx, "watch", &output_ok);
  if (!output_ok) return kExitUsage;
  const std::string id = OneJobId(args, ctx, "watch");
  if (id.empty()) return kExitUsage;
  auto jobs = Connect(args, ctx, "watch");
  if (jobs == nullptr) return kExitUsage;
  if (json) return WatchToEndAsJson(*jobs, id, ctx);
  return WatchToEnd(*jobs, id, ctx, IsTerminal(ctx));
}

int RunJobs(const CommandArgs& args, const CommandContext& ctx) {
  bool output_ok;
  const bool json = JsonOutput(args, ctx, "jobs", &output_ok);
  if (!output_ok) return kExitUsage;
  auto limit = args.GetInt("limit", 0);
  if (!limit.ok()) {
    *ctx.err << "lockstep jobs: " << limit.status().message() << "\n";
    return kExitUsage;
  }
  auto jobs = Connect(args, ctx, "jobs");
  if (jobs == nullptr) return kExitUsage;
  absl::StatusOr<std::vector<v1::JobRecord>> list = jobs->ListJobs(*limit);
  if (!list.ok()) return FailRpc(ctx, "jobs", list.status());
  if (json) {
    v1::ListJobsResponse r;
    for (v1::JobRecord& j : *list) {
      j.clear_spec();  // `describe` shows the spec
      *r.add_jobs() = std::move(j);
    }
    return PrintJson(r, ctx);
  }
  *ctx.out << client::FormatJobsTable(*list, absl::Now());
  return kExitOk;
}

int RunDescribe(const CommandArgs& args, const CommandContext& ctx) {
  bool output_ok;
  const bool json = JsonOutput(args, ctx, "describe", &output_ok);
  if (!output_ok) return kExitUsage;
  const std::string id = OneJobId(args, ctx, "describe");
  if (id.empty()) return kExitUsage;
  auto jobs = Connect(args, ctx, "describe");
  if (jobs == nullptr) return kExitUsage;
  absl::StatusOr<v1::GetJobResponse> job = jobs->GetJob(id);
  if (!job.ok()) return FailRpc(ctx, "describe", job.status());
  job->mutable_job()->clear_spec();  // shown decoded in `spec`
  if (json) return PrintJson(*job, ctx);
  *ctx.out << client::FormatJobDescription(*job);
  return kExitOk;
}

int RunCancel(const CommandArgs& args, const CommandContext& ctx) {
  bool output_ok;
  const bool json = JsonOutput(args, ctx, "cancel", &output_ok);
  if (!output_ok) return kExitUsage;
  const std::string id = OneJobId(args, ctx, "cancel");
  if (id.empty()) return kExitUsage;
  auto jobs = Connect(args, ctx, "cancel");
  if (jobs == nullptr) return kExitUsage;
  absl::StatusOr<v1::JobRecord> job = jobs->CancelJob(id, args.Get("reason"));
  if (!job.ok()) return FailRpc(ctx, "cancel", job.status());
  if (json) {
    job->clear_spec();  // `describe` shows the spec
    return PrintJson(*job, ctx);
  }
  *ctx.out << job->id() << " " << v1::JobState_Name(job->state()) << ": "
           << client::EscapeForTerminal(job->reason()) << "\n";
  return kExitOk;
}

// The client of a `command` on one TASK (drain, release), after checking --output (`*json`)
// and that one TASK is given; nullptr (after printing why) on a usage error.
std::unique_ptr<client::JobServiceClient> ConnectForTask(const CommandArgs& args,
                                                         const CommandContext& ctx,
                                                         const std::string& command, bool* json) {
  bool output_ok;
  *json = JsonOutput(args, ctx, command, &output_ok);
  if (!output_ok) return nullptr;
  if (args.positional().size() != 1) {
    *ctx.err << "lockstep " << command
             << ": expected one TASK such as worker/1 (see `lockstep status`)\n";
    return nullptr;
  }
  return Connect(args, ctx, command);
}

int RunDrain(const CommandArgs& args, const CommandContext& ctx) {
  bool json;
  auto jobs = ConnectForTask(args, ctx, "drain", &json);
  if (jobs == nullptr) return kExitUsage;
  const bool undo = args.Has("undo");
  absl::StatusOr<v1::DrainWorkerResponse> drained = jobs->DrainWorker(args.positional()[0], undo);
  if (!drained.ok()) return FailRpc(ctx, "drain", drained.status());
  if (json) return PrintJson(*drained, ctx);
  const std::string task = args.positional()[0];
  if (undo) {
    *ctx.out << task << " is schedulable again\n";
  } else if (drained->job_id().empty()) {
    *ctx.out << task << " drained: it ran no job; no job is scheduled on it until `lockstep drain "
             << task << " --undo`\n";
  } else {
    *ctx.out << task << " drained: job " << drained->job_id()
             << " stops after its next step with a checkpoint and restarts on other workers "
                "(not counted as a restart); undo with `lockstep drain "
             << task << " --undo`\n";
  }
  return kExitOk;
}

int RunRelease(const CommandArgs& args, const CommandContext& ctx) {
  bool json;
  auto jobs = ConnectForTask(args, ctx, "release", &json);
  if (jobs == nullptr) return kExitUsage;
  absl::StatusOr<v1::ReleaseTaskResponse> released = jobs->ReleaseTask(args.positional()[0]);
  if (!released.ok()) return FailRpc(ctx, "release", released.status());
  if (json) return PrintJson(*released, ctx);
  const std::string task = args.positional()[0];
  *ctx.out << task << " released"
           << (released->identity().empty() ? "" : " from identity " + released->identity())
           << ": any worker identity may register it now\n";
  return kExitOk;
}

}  // namespace

bool IsTerminal(const CommandContext& ctx) {
  return ctx.out == &std::cout && isatty(STDOUT_FILENO) == 1;
}

int WatchToEnd(client::JobServiceClient& jobs, const std::string& id, const CommandContext& ctx,
               bool live, v1::JobRecord* final, const std::function<bool()>& stop) {
  // Rate for the ETA: steps between the first and the latest progress seen.
  int64_t first_step = -1;
  absl::Time first_time;
  bool bar_shown = false;
  v1::JobState last_state = v1::JOB_STATE_UNSPECIFIED;
  absl::StatusOr<v1::JobEvent> last = jobs.WatchJob(
      id,
      [&](const v1::JobEvent& e) {
        const v1::JobRecord& j = e.job();
        const v1::JobProgress& p = j.progress();
        const bool state_changed = j.state() != last_state;
        last_state = j.state();
        if (client::JobEnded(j.state())) return;  // FormatJobResult below says it all
        if (!live) {
          *ctx.out << client::FormatEventLine(e) << "\n";
          ctx.out->flush();
          return;
        }
        if (state_changed) {
          if (bar_shown) *ctx.out << "\n";
          *ctx.out << j.id() << " " << v1::JobState_Name(j.state())
                   << (e.message().empty()
                           ? ""
                           : client::EscapeForTerminal(absl::StrCat("  ", e.message())))
                   << "\n";
          bar_shown = false;
        }
        if (j.state() == v1::RUNNING && p.unix_micros() != 0) {
          const absl::Time t = absl::FromUnixMicros(p.unix_micros());
          if (first_step < 0) {
            first_step = p.step();
            first_time = t;
          }
          double eta = -1;
          const double elapsed = absl::ToDoubleSeconds(t - first_time);
          if (p.step() > first_step && elapsed > 0) {
            eta = (p.total_steps() - p.step()) / ((p.step() - first_step) / elapsed);
          }
          *ctx.out << "\r" << client::FormatProgressBar(p, eta) << "\033[K";
          bar_shown = true;
        }
        ctx.out->flush();
      },
      absl::InfiniteFuture(), stop);
  if (bar_shown) *ctx.out << "\n";
  if (!last.ok()) {
    *ctx.err << "lockstep watch: " << client::EscapeForTerminal(last.status().message()) << "\n";
    return kExitFailure;
  }
  *ctx.out << client::FormatJobResult(last->job());
  if (final != nullptr) *final = last->job();
  return last->job().state() == v1::SUCCEEDED ? kExitOk : kExitFailure;
}

Command SubmitCommand() {
  Command c;
  c.name = "submit";
  c.usage = "submit JOB.json [--watch] [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary = "Submits a job (JSON, the JobSpec proto's JSON mapping); --watch follows it.";
  c.options =
      WithConnection({kOutputOption,
                      {"watch",
                       "Follow the job until it ends (exit 0 only if it SUCCEEDED); with "
                       "--output=json, JSON lines as `watch --output=json` prints them, after the "
                       "{\"jobId\": ...} line.",
                       /*takes_value=*/false}});
  c.run = RunSubmit;
  return c;
}

Command WatchCommand() {
  Command c;
  c.name = "watch";
  c.usage = "watch JOB [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary = "Follows a job to its end: progress, then the final figures; exit 0 if SUCCEEDED.";
  c.options = WithConnection(
      {{"output",
        "table (default) or json: JSON lines, one JobEvent per line while the job "
        "runs, then the final JobRecord (the protos' JSON mapping, without the spec)."}});
  c.run = RunWatch;
  return c;
}

Command JobsCommand() {
  Command c;
  c.name = "jobs";
  c.usage = "jobs [--limit=N] [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary = "Lists every job, newest first: state, attempt, step, loss, accuracy, reason.";
  c.options = WithConnection({kOutputOption, {"limit", "At most N jobs (default all)."}});
  c.run = RunJobs;
  return c;
}

Command DescribeCommand() {
  Command c;
  c.name = "describe";
  c.usage = "describe JOB [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary = "Shows one job: state and reason, transitions, progress, each worker's report.";
  c.options = WithConnection({kOutputOption});
  c.run = RunDescribe;
  return c;
}

Command DrainCommand() {
  Command c;
  c.name = "drain";
  c.usage = "drain TASK [--undo] [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary =
      "Drains a worker (e.g. worker/1): its job stops after the next step with a checkpoint and "
      "restarts elsewhere; no job is scheduled on it until --undo.";
  c.options = WithConnection(
      {kOutputOption, {"undo", "Make the worker schedulable again.", /*takes_value=*/false}});
  c.run = RunDrain;
  return c;
}

Command ReleaseCommand() {
  Command c;
  c.name = "release";
  c.usage = "release TASK [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary =
      "Releases a task (e.g. worker/1) from the worker certificate that registered it, so "
      "another may register it (a replaced machine); the task must not be ALIVE.";
  c.options = WithConnection({kOutputOption});
  c.run = RunRelease;
  return c;
}

Command CancelCommand() {
  Command c;
  c.name = "cancel";
  c.usage = "cancel JOB [--reason=TEXT] [--coordinator=HOST:PORT] [--output=table|json]";
  c.summary = "Cancels a job; its workers stop within 2 s.";
  c.options = WithConnection({kOutputOption, {"reason", "Recorded with the CANCELLED state."}});
  c.run = RunCancel;
  return c;
}

}  // namespace cli
}  // namespace lockstep

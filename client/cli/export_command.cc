#include "client/cli/export_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint.h"
#include "client/cli/connection.h"
#include "client/job_format.h"
#include "export/builtin_formats.h"

namespace lockstep {
namespace cli {
namespace {

int Fail(const CommandContext& ctx, const absl::Status& s) {
  *ctx.err << "lockstep export: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

// The checkpoint at `path`: a file as it is, a directory's newest that reads back whole.
absl::StatusOr<checkpoint::CheckpointManager::Restored> ReadCheckpoint(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("\"", path, "\": no such file or directory"));
  }
  if (S_ISDIR(st.st_mode)) return checkpoint::CheckpointManager::RestoreLatest(path);
  auto checkpoint = checkpoint::CheckpointManager::ReadFile(path);
  if (!checkpoint.ok()) return checkpoint.status();
  return checkpoint::CheckpointManager::Restored{*std::move(checkpoint), path};
}

std::string Mib(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

// What a JOB exports: its checkpoint, fetched through the coordinator into `temp` (checked
// there, then read back), and its spec from describe.
struct FetchedJob {
  checkpoint::CheckpointManager::Restored restored;
  v1::JobSpec spec;
};

absl::StatusOr<FetchedJob> FetchJob(client::JobServiceClient& coordinator,
                                    const std::string& job_id, int64_t step,
                                    const std::string& temp, const CommandContext& ctx) {
  absl::StatusOr<v1::GetJobResponse> job = coordinator.GetJob(job_id);
  if (!job.ok()) return job.status();
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!out) return absl::FailedPreconditionError(absl::StrCat("--output: cannot write ", temp));
  v1::CheckpointChunk header;
  int64_t received = 0;
  absl::Time shown = absl::Now();
  v1::FetchCheckpointRequest request;
  request.set_job_id(job_id);
  request.set_step(step);
  absl::Status fetched = coordinator.FetchCheckpoint(
      request,
      [&](const v1::CheckpointChunk& chunk) -> absl::Status {
        if (header.total_bytes() == 0) {
          header = chunk;
          *ctx.err << "fetching step " << chunk.step() << " (" << Mib(chunk.total_bytes())
                   << ") from " << chunk.source().type() << "/" << chunk.source().index() << ": "
                   << chunk.source_file() << "\n";
          return absl::OkStatus();
        }
        out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
        if (!out) return absl::DataLossError(absl::StrCat("--output: writing ", temp, " failed"));
        received += static_cast<int64_t>(chunk.data().size());
        if (chunk.last() || absl::Now() - shown > absl::Seconds(1)) {
          shown = absl::Now();
          *ctx.err << "  " << Mib(received) << " of " << Mib(header.total_bytes()) << "\n";
        }
        return absl::OkStatus();
      },
      absl::Now() + absl::Hours(1));
  out.close();
  if (!fetched.ok()) return fetched;
  if (!out) return absl::DataLossError(absl::StrCat("--output: writing ", temp, " failed"));
  // Checked by the coordinator as it passed; read back whole here too.
  absl::StatusOr<v1::Checkpoint> checkpoint = checkpoint::CheckpointManager::ReadFile(temp);
  if (!checkpoint.ok()) return checkpoint.status();
  return FetchedJob{
      {*std::move(checkpoint), absl::StrCat(header.source().type(), "/", header.source().index(),
                                            ":", header.source_file())},
      job->spec()};
}

// Writes `bytes` to `path` through a temporary file beside it, so a failed export never
// leaves a partial file under the name asked for.
absl::Status WriteOutput(const std::string& path, const std::string& bytes) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::FailedPreconditionError(absl::StrCat("--output: cannot write ", temp));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      return absl::DataLossError(absl::StrCat("--output: writing ", temp, " failed"));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("--output: cannot rename ", temp, " to ", path));
  }
  return absl::OkStatus();
}

int RunExport(const CommandArgs& args, const CommandContext& ctx) {
  absl::StatusOr<exporting::FormatRegistry> formats = exporting::BuiltinFormats();
  if (!formats.ok()) return Fail(ctx, formats.status());
  const std::string known = absl::StrJoin(formats->names(), ", ");
  if (args.positional().size() != 1) {
    *ctx.err << "lockstep export: expected one CHECKPOINT (a .lsckpt file or a checkpoint "
                "directory) or JOB (a job id)\n";
    return kExitUsage;
  }
  const std::string format_name = args.Get("format");
  const exporting::ExportFormat* format = formats->Find(format_name);
  if (format == nullptr) {
    return Fail(ctx,
                absl::InvalidArgumentError(
                    format_name.empty() ? absl::StrCat("--format is needed: one of ", known)
                                        : absl::StrCat("--format: unknown format \"", format_name,
                                                       "\"; expected one of ", known)));
  }
  const std::string output = args.Get("output");
  if (output.empty()) {
    return Fail(ctx, absl::InvalidArgumentError("--output is needed: the file to write"));
  }
  exporting::ExportRequest request;
  request.options.with_optimizer_state = args.Has("with_optimizer_state");
  v1::JobSpec spec;
  if (args.Has("spec")) {
    absl::StatusOr<v1::JobSpec> read = client::ReadJobSpecFile(args.Get("spec"));
    if (!read.ok()) return Fail(ctx, read.status());
    spec = *std::move(read);
    absl::StatusOr<std::string> json = client::ToJson(spec);
    if (!json.ok()) return Fail(ctx, json.status());
    request.options.spec_json = *json;
    request.spec = &spec;
  }
  // CHECKPOINT or JOB: a path that exists is a checkpoint, anything else a job id.
  const std::string source = args.positional()[0];
  struct stat st;
  absl::StatusOr<checkpoint::CheckpointManager::Restored> restored;
  if (stat(source.c_str(), &st) == 0) {
    *ctx.err << "exporting the checkpoint " << (S_ISDIR(st.st_mode) ? "directory " : "file ")
             << source << "\n";
    restored = ReadCheckpoint(source);
  } else {
    int64_t step = 0;
    if (args.Has("step") && (!absl::SimpleAtoi(args.Get("step"), &step) || step < 0)) {
      return Fail(ctx,
                  absl::InvalidArgumentError(absl::StrCat(
                      "--step: expected a step (0: the newest), got \"", args.Get("step"), "\"")));
    }
    auto coordinator = Connect(args, ctx, "export");
    if (coordinator == nullptr) return kExitUsage;
    *ctx.err << "\"" << source << "\" is no file or directory here: exporting job " << source
             << "'s "
             << (step == 0 ? "newest checkpoint" : absl::StrCat("checkpoint of step ", step))
             << ", fetched through the coordinator " << coordinator->address() << "\n";
    const std::string temp = output + ".lsckpt.part";
    absl::StatusOr<FetchedJob> job = FetchJob(*coordinator, source, step, temp, ctx);
    std::remove(temp.c_str());
    if (!job.ok()) return FailRpc(ctx, "export", job.status());
    if (request.spec == nullptr) {  // the job's own spec, unless --spec gave one
      spec = std::move(job->spec);
      absl::StatusOr<std::string> json = client::ToJson(spec);
      if (!json.ok()) return Fail(ctx, json.status());
      request.options.spec_json = *json;
      request.spec = &spec;
    }
    restored = std::move(job->restored);
  }
  if (!restored.ok()) return Fail(ctx, restored.status());
  request.checkpoint = &restored->checkpoint;
  absl::StatusOr<std::string> bytes = format->write(request);
  if (!bytes.ok()) {
    return Fail(ctx, absl::Status(bytes.status().code(),
                                  absl::StrCat(restored->path, ": ", bytes.status().message())));
  }
  if (absl::Status s = WriteOutput(output, *bytes); !s.ok()) return Fail(ctx, s);
  *ctx.out << "exported " << restored->path << " (job " << restored->checkpoint.job_id()
           << ", step " << restored->checkpoint.global_step() << ") as " << format->name << ": "
           << output << " (" << bytes->size() << " bytes)\n";
  return kExitOk;
}

}  // namespace

Command ExportCommand() {
  // The formats come from the registry, so the usage never disagrees with what runs.
  absl::StatusOr<exporting::FormatRegistry> formats = exporting::BuiltinFormats();
  const std::vector<std::string> names =
      formats.ok() ? formats->names() : std::vector<std::string>{};
  Command c;
  c.name = "export";
  c.usage = absl::StrCat("export CHECKPOINT|JOB --format=", absl::StrJoin(names, "|"),
                         " --output=PATH [--with_optimizer_state] [--spec=JOB.json] [--step=N]");
  c.summary = "write a checkpoint's model or weights in a format other tools read";
  c.options = ConnectionOptions();
  std::vector<OptionSpec> own = {
      {"format", absl::StrCat("the export format: ", absl::StrJoin(names, ", "))},
      {"output", "the file to write"},
      {"with_optimizer_state", "add the optimizer slots (\"<variable>/<slot>\")", false},
      {"spec",
       "the job's spec (JSON): the model for onnx, and the export's metadata (a JOB's own by "
       "default)"},
      {"step", "JOB: the checkpoint of this step instead of the newest"},
  };
  c.options.insert(c.options.end(), own.begin(), own.end());
  c.run = RunExport;
  return c;
}

}  // namespace cli
}  // namespace lockstep

#include "client/cli/export_command.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/job_format.h"
#include "export/builtin_formats.h"
#include "worker/chief/checkpoint.h"

namespace lockstep {
namespace cli {
namespace {

int Fail(const CommandContext& ctx, const absl::Status& s) {
  *ctx.err << "lockstep export: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

// The checkpoint at `path`: a file as it is, a directory's newest that reads back whole.
absl::StatusOr<chief::CheckpointManager::Restored> ReadCheckpoint(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CHECKPOINT: \"", path,
        "\" is no checkpoint file or directory. Exporting a job's newest checkpoint by its id "
        "needs an RPC that fetches it through the coordinator, which Lockstep does not offer "
        "yet: copy the checkpoint from the chief's checkpoint.dir (or a worker's --state_dir) "
        "and export the file"));
  }
  if (S_ISDIR(st.st_mode)) return chief::CheckpointManager::RestoreLatest(path);
  auto checkpoint = chief::CheckpointManager::ReadFile(path);
  if (!checkpoint.ok()) return checkpoint.status();
  return chief::CheckpointManager::Restored{*std::move(checkpoint), path};
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
                "directory)\n";
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
  auto restored = ReadCheckpoint(args.positional()[0]);
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
  c.usage = absl::StrCat("export CHECKPOINT --format=", absl::StrJoin(names, "|"),
                         " --output=PATH [--with_optimizer_state] [--spec=JOB.json]");
  c.summary = "write a checkpoint's model or weights in a format other tools read";
  c.options = {
      {"format", absl::StrCat("the export format: ", absl::StrJoin(names, ", "))},
      {"output", "the file to write"},
      {"with_optimizer_state", "add the optimizer slots (\"<variable>/<slot>\")", false},
      {"spec", "the job's spec (JSON): the model for onnx, and the export's metadata"},
  };
  c.run = RunExport;
  return c;
}

}  // namespace cli
}  // namespace lockstep

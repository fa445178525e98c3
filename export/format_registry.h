// The export formats `lockstep export --format=NAME` offers, by name. Each format registers
// itself from its own file (RegisterSafetensors in safetensors.h, RegisterNpz in npz.h);
// BuiltinFormats() (builtin_formats.h) builds the registry of them all, so a new format adds
// a file and one line there, never a case in the CLI.
//
// No process-wide instance: the caller owns the registry it builds. Thread model: filled on
// one thread by Register; a filled registry is immutable and may be read from any thread.
#ifndef LOCKSTEP_EXPORT_FORMAT_REGISTRY_H_
#define LOCKSTEP_EXPORT_FORMAT_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "export/weights.h"
#include "lockstep/v1/checkpoint.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep::exporting {

// What an export reads: a checkpoint read back whole, and how to export it.
struct ExportRequest {
  const v1::Checkpoint* checkpoint = nullptr;  // not owned; never null
  // The job's spec (the CLI's --spec): the model and its input transformations, which a
  // format that holds the computation (ONNX) needs. Not owned; may be null.
  const v1::JobSpec* spec = nullptr;
  WeightsOptions options;
};

struct ExportFormat {
  std::string name;     // what --format names: "safetensors"
  std::string summary;  // one line for the usage text
  // The exported file's bytes; INVALID_ARGUMENT naming what cannot be exported.
  std::function<absl::StatusOr<std::string>(const ExportRequest&)> write;
};

class FormatRegistry {
 public:
  // ALREADY_EXISTS for a name registered twice; INVALID_ARGUMENT without a name or writer.
  absl::Status Register(ExportFormat format);
  // Null when no format has that name.
  const ExportFormat* Find(const std::string& name) const;
  // The registered names, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ExportFormat> formats_;
};

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_FORMAT_REGISTRY_H_

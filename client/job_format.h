// Job specs and job records as the CLI reads and shows them: JobSpec from JSON (the proto
// JSON mapping), the `lockstep jobs` table, `lockstep describe`, the lines and the progress
// bar of `lockstep watch`, and `--output=json`. Stateless functions.
#ifndef LOCKSTEP_CLIENT_JOB_FORMAT_H_
#define LOCKSTEP_CLIENT_JOB_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace client {

// Whether a job in this state has ended: SUCCEEDED, FAILED or CANCELLED.
bool JobEnded(v1::JobState state);

// INVALID_ARGUMENT "<source>: <what>" for malformed JSON, unknown fields (named, e.g.
// "model.layers[0]") and bad enum names.
absl::StatusOr<v1::JobSpec> ParseJobSpecJson(absl::string_view json, absl::string_view source);

// Reads and parses a job file; INVALID_ARGUMENT / NOT_FOUND naming the path.
absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path);

// One row per job: ID, NAME, STATE, ATTEMPT, STEP, LOSS, EVAL ACC, AGE, REASON.
std::string FormatJobsTable(const std::vector<v1::JobRecord>& jobs, absl::Time now);

// Everything about one job: state, reason, its plan's decisions (strategy, replicas,
// communication backend with AUTO resolved, packs and timeout, checkpoints, input, restarts),
// transitions, progress, per-worker reports.
std::string FormatJobDescription(const v1::GetJobResponse& job);
// The hang verdict and stragglers of a running job ("" when it has none), each line after
// `prefix`: "HANG:      all-reduce #12 (4 MiB): ...", "STRAGGLER: worker/2: ...".
std::string FormatDiagnosis(const v1::JobDiagnosis& d, const std::string& prefix);

// "job-000001 RUNNING step 120/900 loss 0.4312 acc 0.91 1234 ex/s" (plain watch lines).
std::string FormatEventLine(const v1::JobEvent& event);

// "[#######.........] 120/900 loss 0.4312 1234 ex/s ETA 0:05" for a terminal's line;
// eta_seconds < 0: unknown ("-:--").
std::string FormatProgressBar(const v1::JobProgress& progress, double eta_seconds, int width = 30);

// The final figures: state, reason, steps, loss, accuracies, checkpoint and summary paths.
std::string FormatJobResult(const v1::JobRecord& job);

// The proto3 JSON mapping of any message (lowerCamelCase, enums by name).
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
// The same on one line, without a newline (JSON lines: `watch --output=json`).
absl::StatusOr<std::string> ToJsonLine(const google::protobuf::Message& message);

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_JOB_FORMAT_H_

#include "client/status_format.h"

#include <google/protobuf/util/json_util.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/job_format.h"
#include "client/terminal_text.h"
#include "common/incarnation.h"

namespace lockstep {
namespace client {
namespace {

// A GPU's model from the driver's product name: "NVIDIA H100 80GB HBM3" -> "H100",
// "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA GeForce RTX 4090" -> "GeForce-RTX-4090".
std::string GpuModel(const v1::Device& d) {
  absl::string_view product = d.product();
  absl::ConsumePrefix(&product, "NVIDIA ");
  std::vector<std::string> words;
  for (absl::string_view w : absl::StrSplit(product, absl::ByAnyChar(" -"), absl::SkipEmpty())) {
    if (absl::EndsWith(w, "GB") || absl::StartsWith(w, "SXM") || absl::StartsWith(w, "PCIe") ||
        absl::StartsWith(w, "HBM")) {
      break;
    }
    words.emplace_back(w);
  }
  return words.empty() ? "GPU" : absl::StrJoin(words, "-");
}

// "2xCPU", "1xH100", "2xCPU,8xH100".
std::string Devices(const v1::TaskStatus& t) {
  std::map<std::string, int> kinds;
  for (const v1::Device& d : t.devices()) {
    ++kinds[d.kind() == v1::Device::GPU ? GpuModel(d) : v1::Device::Kind_Name(d.kind())];
  }
  std::vector<std::string> parts;
  for (const auto& [kind, n] : kinds) parts.push_back(absl::StrCat(n, "x", kind));
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

}  // namespace

int CountInState(const v1::GetClusterStatusResponse& status, v1::TaskState state) {
  int n = 0;
  for (const v1::TaskStatus& t : status.tasks()) n += t.state() == state;
  return n;
}

std::string FormatStatusTable(const v1::GetClusterStatusResponse& status) {
  std::vector<std::vector<std::string>> rows = {
      {"TASK", "ADDRESS", "STATE", "INCARNATION", "HEARTBEAT", "DEVICES", "JOB"}};
  for (const v1::TaskStatus& t : status.tasks()) {
    rows.push_back({absl::StrCat(t.task().type(), "/", t.task().index()), t.address(),
                    absl::StrCat(v1::TaskState_Name(t.state()), t.draining() ? ",DRAINING" : ""),
                    ShortIncarnation(t.incarnation()),
                    absl::StrFormat("%.1fs ago", t.seconds_since_heartbeat()), Devices(t),
                    t.job_id().empty() ? "-" : absl::StrCat(t.job_id(), " step ", t.step())});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  std::map<std::string, int> by_state;
  for (const v1::TaskStatus& t : status.tasks()) ++by_state[v1::TaskState_Name(t.state())];
  std::vector<std::string> counts;
  for (const auto& [state, n] : by_state) counts.push_back(absl::StrCat(n, " ", state));
  absl::StrAppend(&out, status.tasks_size(), " task(s)",
                  counts.empty() ? "" : absl::StrCat(": ", absl::StrJoin(counts, ", ")),
                  "; coordinator incarnation ", ShortIncarnation(status.coordinator_incarnation()),
                  "\n");
  if (status.insecure()) {
    absl::StrAppend(&out,
                    "WARNING: the cluster runs --insecure: plaintext gRPC, no authentication, "
                    "no authorization\n");
  }
  for (const v1::JobDiagnosis& d : status.diagnoses()) {
    absl::StrAppend(&out, FormatDiagnosis(d, absl::StrCat(d.job_id(), " ")));
  }
  return EscapeForTerminal(out);  // addresses and device names come from workers
}

absl::StatusOr<std::string> FormatStatusJson(const v1::GetClusterStatusResponse& status) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  auto s = google::protobuf::util::MessageToJsonString(status, &out, options);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat("cannot render status as JSON: ", s.ToString()));
  }
  return out;
}

}  // namespace client
}  // namespace lockstep

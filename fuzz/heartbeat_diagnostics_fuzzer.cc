// Fuzz target: what a worker's heartbeat says about job attempts (HeartbeatRequest.diagnostics:
// flight records and log lines), as the coordinator's DiagnosticsService takes it
// (coordinator/diagnostics_service.h). One coordinator state lives across inputs: a job
// running on worker/0 (attempt 1) and an idle worker/1 of another identity. The first byte
// picks the sender (bit 0: worker/0 or worker/1) and whether the clock moves on (bit 1); the
// rest is a HeartbeatRequest in protobuf wire format. After each input:
//   - no line of worker/1 (which runs nothing) is ever served for the job, nor one of
//     another attempt; everything the sender said about an attempt it does not run was
//     dropped and counted (not_its_attempt);
//   - every served line is within DiagnosticsLimits (size), and a task's lines within its
//     count;
//   - the verdict and the dump answer without crashing.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/diagnostics_service.h"
#include "coordinator/job_service.h"
#include "coordinator/job_store/job_store.h"
#include "coordinator/membership.h"
#include "google/protobuf/util/json_util.h"
#include "lockstep/v1/coordinator.pb.h"

namespace {

using lockstep::FakeClock;
using lockstep::JobStore;
using lockstep::TaskRef;
using namespace lockstep::coordinator;  // NOLINT: a fuzz driver's few names

constexpr DiagnosticsLimits kLimits{.log_lines_per_task = 64,
                                    .log_bytes_per_task = 4096,
                                    .max_line_bytes = 256,
                                    .max_record_bytes = 4096,
                                    .attempts_per_job = 2,
                                    .max_jobs = 8};

struct World {
  FakeClock clock;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<JobStore> store;
  std::unique_ptr<JobService> jobs;
  std::unique_ptr<DiagnosticsService> diagnostics;
  TaskRef runner;    // worker/0: the job's worker
  TaskRef stranger;  // worker/1: runs nothing
  std::string job_id;
};

World* Make() {
  auto* w = new World;
  char dir[] = "/tmp/heartbeat_diagnostics_fuzzer-XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  w->membership = std::make_unique<Membership>(MembershipOptions{}, &w->clock);
  w->store = std::move(JobStore::Open({dir, &w->clock}).value());
  w->jobs = std::make_unique<JobService>(w->store.get(), w->membership.get(), &w->clock);
  if (!w->jobs->Recover().ok()) std::abort();
  w->diagnostics = std::make_unique<DiagnosticsService>(w->jobs.get(), &w->clock,
                                                        DiagnosticsOptions{.limits = kLimits});
  auto add = [&](int index, const std::string& identity) {
    RegisterRequest r;
    r.task = TaskRef{"worker", index};
    r.address = absl::StrCat("127.0.0.1:", 5000 + index);
    r.incarnation = 100 + index;
    r.identity = identity;
    r.devices.emplace_back().set_index(0);
    return w->membership->Register(r).value().task;
  };
  w->runner = add(0, "host0");
  lockstep::v1::JobSpec spec;
  if (!google::protobuf::util::JsonStringToMessage(
           R"({"name": "fuzz", "numWorkers": 1, "globalBatchSize": 64, "steps": 10,
               "model": {"inputShape": [8], "layers": [{"dense": {"units": 4}}],
                         "loss": "SPARSE_CATEGORICAL_CROSSENTROPY"},
               "optimizer": {"sgd": {}, "learningRate": {"constant": {"value": 0.1}}},
               "data": {"train": {"format": "SYNTHETIC", "syntheticExamples": 256}}})",
           &spec)
           .ok()) {
    std::abort();
  }
  w->job_id = w->jobs->Submit(spec).value();
  w->stranger = add(1, "host1");
  return w;
}

World& TheWorld() {
  static World* const w = Make();
  return *w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World& w = TheWorld();
  lockstep::v1::HeartbeatRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  const TaskRef from = (data[0] & 1) ? w.stranger : w.runner;
  const int64_t refused_before = w.diagnostics->dropped(DiagnosticsDrop::kNotItsAttempt);
  if (data[0] & 2) w.clock.Advance(absl::Seconds(1));
  w.diagnostics->OnHeartbeat(from, {request.diagnostics().begin(), request.diagnostics().end()});

  lockstep::v1::GetJobLogsRequest logs;
  logs.set_job_id(w.job_id);
  DiagnosticsService::LogCursor cursor;
  std::map<std::pair<int, TaskRef>, size_t> per_task;
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<lockstep::v1::JobLogLines> next =
        w.diagnostics->NextLogs(logs, &cursor, w.clock.Now());
    if (!next.ok()) std::abort();  // the job exists: never NOT_FOUND
    if (next->end()) break;
    const TaskRef task{next->task().type(), next->task().index()};
    if (task != w.runner || next->attempt() != 1) std::abort();  // not its attempt: served
    for (const lockstep::v1::LogLine& line : next->lines()) {
      if (line.text().size() > kLimits.max_line_bytes) std::abort();
    }
    size_t& n = per_task[{next->attempt(), task}];
    n += next->lines_size();
    if (n > kLimits.log_lines_per_task) std::abort();
  }
  // Everything about an attempt the sender does not run was dropped, and counted so.
  int64_t not_its = 0;
  for (const lockstep::v1::JobDiagnostics& d : request.diagnostics()) {
    if (from == w.runner && d.job_id() == w.job_id && d.attempt() == 1) continue;
    not_its += 1 + d.log_lines_size();
  }
  if (w.diagnostics->dropped(DiagnosticsDrop::kNotItsAttempt) != refused_before + not_its) {
    std::abort();
  }
  absl::StatusOr<lockstep::v1::DumpJobResponse> dump = w.diagnostics->Dump(w.job_id);
  if (!dump.ok() || dump->diagnosis().ranks_size() != 1) std::abort();
  return 0;
}

// train_for_export: trains the bundled digits MLP job for a few steps on one in-process
// worker (the real JobExecutor behind the coordinator's own validation and partitioning, a
// fake coordinator client for the rendezvous) and leaves what tests/export_test.sh compares an
// export against:
//   OUT/ckpt/*.lsckpt     the job's checkpoint (the chief's, as the cluster writes it)
//   OUT/spec.json         the job spec it ran
//   OUT/dump/manifest.tsv one line per variable and then per optimizer slot:
//                         "variable|slot <TAB> name <TAB> dtype <TAB> dims,comma,separated
//                          <TAB> file", the file (in OUT/dump) holding its raw bytes
//   OUT/report.txt        "step N", "eval_accuracy X" of the job's final report
//   OUT/forward.f32       with --forward=ROWS.f32 (raw little-endian float rows of the
//                         model's input, as the data files hold them): Lockstep's own
//                         forward pass on them (the job's featureScale, then the model,
//                         Executor::Evaluate) with the checkpoint's variables, raw floats
//   OUT/eval_rows.f32     with --eval_rows=N: the first N rows of the job's eval data (its
//                         data.eval source, or the data.eval_fraction held out of data.train
//                         by the job's seed, as the workers build it), raw as the files hold
//                         them (before featureScale), float32: the rows to give --forward
// Usage: train_for_export --job=JOB.json --data=digits.csv.gz --out=DIR --steps=N
//                         [--init_from=EXPORT.safetensors] [--forward=ROWS.f32]
//                         [--eval_rows=N]
// With --init_from the job starts from that export (JobSpec.init_from) at a learning rate of
// 0, so its checkpoint holds the variables it started from.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint.h"
#include "client/job_format.h"
#include "coordinator/partitioner.h"
#include "engine/executor.h"
#include "engine/model_builder.h"
#include "jobspec/lower.h"
#include "worker/fake_worker_service_client.h"
#include "worker/job_executor.h"
#include "worker/job_input.h"

namespace lockstep {
namespace {

int Fail(const std::string& what) {
  std::cerr << "train_for_export: " << what << "\n";
  return 1;
}

// "--name=value" arguments.
std::map<std::string, std::string> Flags(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      flags[a.substr(2, eq - 2)] = a.substr(eq + 1);
    }
  }
  return flags;
}

// Lockstep's forward pass on the raw rows in `rows_path`, written to `out_path`.
absl::Status Forward(const v1::JobSpec& spec, const v1::Checkpoint& checkpoint,
                     const std::string& rows_path, const std::string& out_path) {
  std::ifstream in(rows_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  int64_t width = 1;
  for (int64_t d : spec.model().input_shape()) width *= d;
  const int64_t rows = static_cast<int64_t>(bytes.size() / 4) / width;
  if (rows == 0 || static_cast<int64_t>(bytes.size()) != rows * width * 4) {
    return absl::InvalidArgumentError(absl::StrCat(rows_path, ": not whole rows of ", width));
  }
  std::vector<float> x(rows * width);
  std::memcpy(x.data(), bytes.data(), bytes.size());
  const float scale = spec.data().train().feature_scale();
  if (scale != 0 && scale != 1) {
    for (float& v : x) v = (v - 0.0f) / (1.0f / scale);  // the pipeline's Normalize
  }
  std::vector<int64_t> dims = {rows};
  dims.insert(dims.end(), spec.model().input_shape().begin(), spec.model().input_shape().end());
  absl::StatusOr<engine::Graph> graph = engine::BuildModel(spec.model());
  if (!graph.ok()) return graph.status();
  absl::StatusOr<std::unique_ptr<engine::Executor>> executor = engine::Executor::Create(&*graph);
  if (!executor.ok()) return executor.status();
  std::vector<engine::Tensor> variables;
  for (const engine::VariableInfo& info : graph->Variables()) {
    const v1::NamedTensor* found = nullptr;
    for (const v1::NamedTensor& v : checkpoint.variables()) {
      if (v.name() == info.name) found = &v;
    }
    if (found == nullptr) return absl::NotFoundError("no variable " + info.name);
    absl::StatusOr<engine::Tensor> t = engine::Tensor::FromProto(found->tensor());
    if (!t.ok()) return t.status();
    variables.push_back(*std::move(t));
  }
  engine::Tensor output;
  absl::StatusOr<engine::StepResult> r = (*executor)->Evaluate(
      variables, {{"features", engine::Tensor::FromVector<float>(x, engine::Shape(dims))}},
      &output);
  if (!r.ok()) return r.status();
  std::ofstream(out_path, std::ios::binary)
      .write(static_cast<const char*>(output.raw_data()),
             static_cast<std::streamsize>(output.num_bytes()));
  return absl::OkStatus();
}

// The first `count` rows of the job's eval data, unscaled (the job's input built without its
// featureScale: the same files, split and seed), as float32 to `out_path`.
absl::Status EvalRows(v1::JobSpec spec, int64_t count, const std::string& out_path) {
  spec.mutable_data()->mutable_train()->clear_feature_scale();
  if (spec.data().has_eval()) spec.mutable_data()->mutable_eval()->clear_feature_scale();
  absl::StatusOr<v1::JobPlan> plan =
      jobspec::LowerJobSpec(spec, jobspec::ClusterFacts::OneWorker(1));
  if (!plan.ok()) return plan.status();
  absl::StatusOr<worker::JobInput> input = worker::BuildJobInput(spec, plan->input());
  if (!input.ok()) return input.status();
  if (!input->eval.has_value()) return absl::InvalidArgumentError("--eval_rows: no eval data");
  const engine::Tensor& features = input->eval->features;
  const int64_t n = features.shape().dim(0);
  if (count <= 0 || count > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_rows: ", count, " is outside [1, ", n, "], the eval rows"));
  }
  if (features.dtype() != DType::kF32) {
    return absl::InvalidArgumentError("--eval_rows: the eval features are not float32");
  }
  std::ofstream(out_path, std::ios::binary)
      .write(static_cast<const char*>(features.raw_data()),
             static_cast<std::streamsize>(features.num_bytes() / n * count));
  return absl::OkStatus();
}

void Dump(const std::string& dir, const std::string& kind, const v1::NamedTensor& t, int index,
          std::ofstream& manifest) {
  const std::string file = absl::StrCat(kind, index, ".bin");
  std::ofstream(dir + "/" + file, std::ios::binary) << t.tensor().content();
  manifest << kind << "\t" << t.name() << "\t" << v1::DType_Name(t.tensor().dtype()) << "\t"
           << absl::StrJoin(t.tensor().shape().dims(), ",") << "\t" << file << "\n";
}

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags = Flags(argc, argv);
  for (const char* f : {"job", "data", "out", "steps"}) {
    if (flags[f].empty()) return Fail(absl::StrCat("--", f, " is needed"));
  }
  const std::string out = flags["out"];
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(flags["job"]);
  if (!spec.ok()) return Fail(std::string(spec.status().message()));
  spec->set_name("digits-export");
  spec->mutable_data()->mutable_train()->set_files(0, flags["data"]);
  spec->set_epochs(0);
  spec->set_steps(std::stoll(flags["steps"]));
  spec->set_eval_every_steps(0);
  spec->mutable_checkpoint()->set_dir(out + "/ckpt");
  spec->mutable_checkpoint()->set_every_steps(0);
  spec->clear_summaries();
  if (!flags["init_from"].empty()) {
    spec->mutable_init_from()->set_path(flags["init_from"]);
    spec->mutable_init_from()->set_format(v1::InitFrom::SAFETENSORS);
    spec->mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0);
  }
  absl::StatusOr<v1::JobPlan> plan =
      jobspec::LowerJobSpec(*spec, jobspec::ClusterFacts::OneWorker(1));
  if (!plan.ok()) return Fail(std::string(plan.status().message()));
  coordinator::WorkerSlot slot;
  slot.task = {"worker", 0};
  slot.address = "127.0.0.1:1";
  auto partitions = coordinator::MakePartitions(spec->name(), 0, *spec, *plan, {slot},
                                                coordinator::NewJobSecret());
  if (!partitions.ok()) return Fail(std::string(partitions.status().message()));

  worker::FakeWorkerServiceClient client;
  worker::JobExecutorOptions options;
  options.client = &client;
  options.rendezvous_timeout = absl::Seconds(20);
  auto executor = worker::JobExecutor::Create(partitions->front(), options);
  if (!executor.ok()) return Fail(std::string(executor.status().message()));
  const v1::JobReport report = (*executor)->Run();
  if (report.phase() != v1::JobReport::DONE) return Fail("the job failed: " + report.error());

  auto restored = checkpoint::CheckpointManager::RestoreLatest(out + "/ckpt");
  if (!restored.ok()) return Fail(std::string(restored.status().message()));
  absl::StatusOr<std::string> json = client::ToJson(*spec);
  if (!json.ok()) return Fail(std::string(json.status().message()));
  std::ofstream(out + "/spec.json") << *json;
  std::filesystem::create_directories(out + "/dump");
  std::ofstream manifest(out + "/dump/manifest.tsv");
  int i = 0;
  for (const v1::NamedTensor& v : restored->checkpoint.variables()) {
    Dump(out + "/dump", "variable", v, i++, manifest);
  }
  for (const v1::NamedTensor& s : restored->checkpoint.optimizer_slots()) {
    Dump(out + "/dump", "slot", s, i++, manifest);
  }
  if (!flags["eval_rows"].empty()) {
    absl::Status s = EvalRows(*spec, std::stoll(flags["eval_rows"]), out + "/eval_rows.f32");
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  if (!flags["forward"].empty()) {
    absl::Status s = Forward(*spec, restored->checkpoint, flags["forward"], out + "/forward.f32");
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  std::ofstream(out + "/report.txt") << "step " << report.step() << "\neval_accuracy "
                                     << absl::StrCat(report.eval_accuracy()) << "\n";
  std::cout << "trained " << report.step() << " steps: " << restored->path << "\n";
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) { return lockstep::Main(argc, argv); }

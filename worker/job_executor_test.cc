#include "worker/job_executor.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_bound.h"
#include "common/tfrecord.h"
#include "engine/model_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/lower.h"
#include "worker/chief/event_writer.h"
#include "worker/chief/weights_match.h"
#include "worker/coordinator_store.h"
#include "worker/fake_worker_service_client.h"
#include "worker/job_chief.h"
#include "worker/job_restore.h"
#include "worker/partition_group.h"
#include "worker/test_hooks.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
}

// The digits MLP job of examples/ (64-128-10, Adam with warm-up and cosine decay).
v1::JobSpec DigitsSpec(const std::string& name, int64_t epochs) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_strategy(v1::MULTI_WORKER_MIRRORED);
  auto model = engine::ParseModelSpecJson(ReadText("examples/digits_mlp.json"));
  EXPECT_TRUE(model.ok()) << model.status();
  *spec.mutable_model() = *model;
  auto optimizer = engine::ParseOptimizerSpecJson(ReadText("examples/digits_optimizer.json"));
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  *spec.mutable_optimizer() = *optimizer;
  v1::DataSource* train = spec.mutable_data()->mutable_train();
  train->add_files("examples/data/digits.csv.gz");
  train->set_format(v1::DataSource::CSV);
  train->set_feature_scale(0.0625f);
  spec.mutable_data()->set_eval_fraction(0.2);
  spec.set_global_batch_size(32);
  spec.set_epochs(epochs);
  spec.set_eval_every_steps(200);
  spec.mutable_checkpoint()->set_dir(TempDir(name + "/ckpt"));
  spec.mutable_checkpoint()->set_every_steps(300);
  spec.mutable_checkpoint()->set_keep(2);
  spec.mutable_summaries()->set_dir(TempDir(name + "/tb"));
  spec.mutable_summaries()->set_every_steps(20);
  spec.mutable_communication()->set_timeout_ms(20000);
  spec.set_seed(7);
  return spec;
}

// Worker `rank` of `workers`' partition (one CPU device each).
v1::Partition PartitionOf(const v1::JobSpec& spec, int rank, int workers) {
  v1::Partition p;
  p.set_job_id(spec.name());
  p.set_attempt(0);
  *p.mutable_spec() = spec;
  std::vector<std::string> addresses;
  for (int w = 0; w < workers; ++w) addresses.push_back(absl::StrCat("127.0.0.1:", 2000 + w));
  SetWorkerGroup(addresses, rank, &p);
  p.add_replica_ids(rank);
  p.set_num_replicas_in_sync(workers);
  p.set_shard_index(rank);
  p.set_num_shards(workers);
  p.set_rendezvous_prefix(absl::StrCat("jobs/", spec.name(), "/0"));
  p.set_secret("0123456789abcdef");
  // As the coordinator lowers it at submit (`workers` workers of one CPU device).
  jobspec::ClusterFacts facts;
  facts.workers.assign(workers, jobspec::WorkerFacts{1, 0});
  absl::StatusOr<v1::JobPlan> plan = jobspec::LowerJobSpec(spec, facts);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) *p.mutable_plan() = *plan;
  return p;
}

// Bounds for the abort and failure tests, from the settings a run that is not ended would
// wait out: the rendezvous timeout (20 s here), the 60 s default collective timeout, or a
// million steps. A run that is ended returns within a step or a rendezvous poll; kFailFastBound
// allows a loaded machine's scheduling and stays a quarter of the shortest of those waits.
constexpr absl::Duration kRendezvousTimeout = absl::Seconds(20);
constexpr absl::Duration kFailFastBound = absl::Seconds(5);

std::unique_ptr<JobExecutor> MakeExecutor(const v1::Partition& p, WorkerServiceClient* client,
                                          TestHooks hooks = {}) {
  JobExecutorOptions options;
  options.client = client;
  options.test_hooks = hooks;
  options.rendezvous_timeout = kRendezvousTimeout;
  auto e = JobExecutor::Create(p, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

// Every record of the event file in `dir` reads back with valid CRCs; returns the count.
// The scalar tags seen go to *tags when it is not null.
int CountEventRecords(const std::string& dir, std::set<std::string>* tags = nullptr) {
  int records = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  std::string path;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("events.out.tfevents.", 0) == 0) {
      path = dir + "/" + e->d_name;
    }
  }
  closedir(d);
  if (path.empty()) return -1;
  auto reader = TfRecordReader::Open(path);
  if (!reader.ok()) return -1;
  while (true) {
    absl::StatusOr<std::string> r = reader->Next();
    if (absl::IsOutOfRange(r.status())) break;
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return -1;
    ++records;
    v1::Event event;
    EXPECT_TRUE(event.ParseFromString(*r)) << "record " << records << " is not an Event";
    if (tags != nullptr) {
      for (const v1::Summary::Value& v : event.summary().value()) tags->insert(v.tag());
    }
  }
  return records;
}

bool WaitForStep(const JobExecutor& e, int64_t step, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (e.report().step() >= step) return true;
    if (e.state() == JobExecutor::State::kFailed) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

// With file roots (lockstepd --data_root/--output_root), a partition whose files lie outside
// them is refused before anything runs, naming the field; inside, its paths are resolved.
TEST(JobExecutor, FilesOutsideTheWorkersRootsAreRefusedNamingTheField) {
  FakeWorkerServiceClient client;
  const v1::JobSpec spec = DigitsSpec("roots", 1);
  JobExecutorOptions options;
  options.client = &client;
  // The data's real directory (runfiles are symlinks to it).
  const std::string data_dir =
      std::filesystem::canonical("examples/data/digits.csv.gz").parent_path().string();
  options.file_roots =
      std::make_shared<const FileRoots>(FileRoots::Create({data_dir}, {TempDir("roots")}).value());
  auto accepted = JobExecutor::Create(PartitionOf(spec, 0, 1), options);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ((*accepted)->partition().spec().checkpoint().dir(), TempDir("roots/ckpt"));

  options.file_roots = std::make_shared<const FileRoots>(
      FileRoots::Create({TempDir("elsewhere")}, {TempDir("roots")}).value());
  absl::Status data = JobExecutor::Create(PartitionOf(spec, 0, 1), options).status();
  EXPECT_EQ(data.code(), absl::StatusCode::kInvalidArgument) << data;
  EXPECT_THAT(std::string(data.message()), HasSubstr("data.train.files[0]: "));
  EXPECT_THAT(std::string(data.message()), HasSubstr("--data_root"));

  options.file_roots = std::make_shared<const FileRoots>(
      FileRoots::Create({data_dir}, {TempDir("elsewhere")}).value());
  absl::Status out = JobExecutor::Create(PartitionOf(spec, 0, 1), options).status();
  EXPECT_THAT(std::string(out.message()), HasSubstr("checkpoint.dir: "));
  EXPECT_THAT(std::string(out.message()), HasSubstr("--output_root"));
}

TEST(JobExecutor, OneWorkerTrainsDigitsWithCheckpointAndSummaries) {
  FakeWorkerServiceClient client;
  const v1::JobSpec spec = DigitsSpec("one-worker", 20);
  auto executor = MakeExecutor(PartitionOf(spec, 0, 1), &client);
  ASSERT_NE(executor, nullptr);
  const v1::JobReport r = executor->Run();
  ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
  EXPECT_EQ(r.step(), r.total_steps());
  EXPECT_EQ(r.total_steps(), 20 * (1438 / 32));
  EXPECT_GE(r.eval_accuracy(), 0.96);
  EXPECT_GT(r.examples_per_sec(), 0);
  EXPECT_GT(r.learning_rate(), 0);
  auto restored = checkpoint::CheckpointManager::RestoreLatest(spec.checkpoint().dir());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->path, r.checkpoint_path());
  EXPECT_EQ(restored->checkpoint.global_step(), r.total_steps());
  EXPECT_EQ(restored->checkpoint.variables_size(), 4);
  EXPECT_GT(restored->checkpoint.optimizer_slots_size(), 0);
  // 1438 examples in batches of 32: 44 steps per epoch (the last 30 examples dropped).
  // The data position counts epochs as the pipeline runs them: the end of the 20th, and
  // at step 600 (checkpoint.every_steps 300) 28 steps into the 14th.
  EXPECT_EQ(r.epoch(), 20);
  const v1::DataPosition& end = restored->checkpoint.data_position();
  EXPECT_EQ(end.epoch(), 20);
  EXPECT_EQ(end.element(), 0);
  EXPECT_EQ(DecodeIteratorState(end.iterator_state()).value(), 880);
  auto mid = checkpoint::CheckpointManager::ReadFile(spec.checkpoint().dir() + "/" +
                                                     checkpoint::CheckpointManager::FileName(600));
  ASSERT_TRUE(mid.ok()) << mid.status();
  EXPECT_EQ(mid->data_position().epoch(), 13);
  EXPECT_EQ(mid->data_position().element(), (600 - 13 * 44) * 32);
  EXPECT_EQ(DecodeIteratorState(mid->data_position().iterator_state()).value(), 600);
  std::set<std::string> tags;
  EXPECT_GT(CountEventRecords(spec.summaries().dir(), &tags), 10);
  // Every scalar the chief promises (DESIGN.md, "Chief duties").
  for (absl::string_view tag :
       {chief::summary_tags::kLoss, chief::summary_tags::kTrainAccuracy,
        chief::summary_tags::kEvalAccuracy, chief::summary_tags::kEvalLoss,
        chief::summary_tags::kLearningRate, chief::summary_tags::kExamplesPerSec,
        chief::summary_tags::kBusBandwidth, chief::summary_tags::kStepMs,
        chief::summary_tags::kComputeMs, chief::summary_tags::kAllReduceWaitMs,
        chief::summary_tags::kApplyMs}) {
    EXPECT_EQ(tags.count(std::string(tag)), 1u) << "no " << tag << " scalar in the event file";
  }
}

// The worker executes the plan it is given and re-decides nothing from the spec. This plan
// is one the coordinator refuses to make of this spec (the spec holds nothing out, so
// `epochs` is refused: "epochs: with data.eval_fraction 0 ..."), made by hand: it holds 0.2
// out, checkpoints every 10 steps and keeps 3. The job trains one epoch of the held-out
// split, evaluates on it and checkpoints as planned, not as the spec says.
TEST(JobExecutor, RunsAHandMadePlanTheCoordinatorWouldRefuseExactlyAsPlanned) {
  FakeWorkerServiceClient client;
  v1::JobSpec spec = DigitsSpec("hand-plan", 1);
  v1::Partition p = PartitionOf(spec, 0, 1);  // lowered with eval_fraction 0.2
  spec.mutable_data()->set_eval_fraction(0);
  *p.mutable_spec() = spec;
  const absl::Status refused =
      jobspec::LowerJobSpec(spec, jobspec::ClusterFacts::OneWorker(1)).status();
  EXPECT_THAT(std::string(refused.message()), StartsWith("epochs: with data.eval_fraction 0"));
  ASSERT_EQ(p.plan().input().eval(), v1::InputPlan::HELD_OUT);
  p.mutable_plan()->mutable_checkpoint()->set_every_steps(10);  // the spec says 300
  p.mutable_plan()->mutable_checkpoint()->set_keep(3);          // the spec says 2
  auto executor = MakeExecutor(p, &client);
  ASSERT_NE(executor, nullptr);
  const v1::JobReport r = executor->Run();
  ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
  EXPECT_EQ(r.total_steps(), 1438 / 32);  // one epoch of the 80% the plan holds in
  EXPECT_GE(r.eval_accuracy(), 0);        // evaluated on the 20% it holds out
  std::vector<std::string> kept;
  for (const auto& e : std::filesystem::directory_iterator(spec.checkpoint().dir())) {
    kept.push_back(e.path().filename().string());
  }
  std::sort(kept.begin(), kept.end());
  // Every 10 steps, the newest 3 kept (the spec would give only the final one).
  EXPECT_EQ(kept, (std::vector<std::string>{checkpoint::CheckpointManager::FileName(30),
                                            checkpoint::CheckpointManager::FileName(40),
                                            checkpoint::CheckpointManager::FileName(1438 / 32)}));
}

TEST(JobExecutor, TwoWorkersOverTcpTrainDigitsIdentically) {
  FakeWorkerServiceClient client;
  const v1::JobSpec spec = DigitsSpec("two-workers", 20);
  std::vector<std::unique_ptr<JobExecutor>> executors;
  for (int w = 0; w < 2; ++w) executors.push_back(MakeExecutor(PartitionOf(spec, w, 2), &client));
  ASSERT_NE(executors[0], nullptr);
  ASSERT_NE(executors[1], nullptr);
  std::vector<v1::JobReport> reports(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) threads.emplace_back([&, w] { reports[w] = executors[w]->Run(); });
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(reports[w].phase(), v1::JobReport::DONE) << reports[w].error();
    EXPECT_GE(reports[w].eval_accuracy(), 0.96) << "worker " << w;
  }
  EXPECT_EQ(reports[0].eval_accuracy(), reports[1].eval_accuracy());
  for (int w = 0; w < 2; ++w) {
    // Where the steps went: measured, and the phases fit in the step.
    const v1::JobReport& r = reports[w];
    EXPECT_GT(r.compute_ms(), 0) << "worker " << w;
    EXPECT_GT(r.apply_ms(), 0) << "worker " << w;
    EXPECT_GT(r.allreduce_wait_ms(), 0) << "worker " << w << ": the loss is all-reduced";
    EXPECT_LE(r.compute_ms() + r.allreduce_wait_ms() + r.apply_ms(), r.step_ms() * (1 + 1e-9))
        << "worker " << w;
  }
  EXPECT_FALSE(reports[0].checkpoint_path().empty());
  EXPECT_TRUE(reports[1].checkpoint_path().empty()) << "only the chief writes checkpoints";
  auto restored = checkpoint::CheckpointManager::RestoreLatest(spec.checkpoint().dir());
  ASSERT_TRUE(restored.ok()) << restored.status();
  // The bus bandwidth is that of the gradient all-reduces while they ran: every step moves
  // every variable's gradient once, and they run within the step (overlapping the backward
  // pass), so it is above what moving the gradients once per whole step gives (two workers:
  // busbw = algbw).
  size_t gradient_bytes = 0;
  for (const v1::NamedTensor& v : restored->checkpoint.variables()) {
    gradient_bytes += v.tensor().content().size();
  }
  ASSERT_GT(gradient_bytes, 0u);
  for (int w = 0; w < 2; ++w) {
    const double whole_step_gbps = gradient_bytes / (reports[w].step_ms() / 1e3) / 1e9;
    EXPECT_GT(reports[w].busbw_gbps(), whole_step_gbps) << "worker " << w;
  }
  // Rebatching: each worker's step takes its rows of one global batch of the set, so an
  // epoch is 44 steps as with one worker.
  EXPECT_EQ(restored->checkpoint.data_position().epoch(), 20);
  EXPECT_EQ(restored->checkpoint.data_position().element(), 0);
  EXPECT_EQ(reports[1].epoch(), 20);
  EXPECT_GT(CountEventRecords(spec.summaries().dir()), 10);
}

// The same global batches and seed: one worker and two workers end with the same weights,
// with the job's defaults (AUTO sharding, which is DATA rebatching for in-memory data, and
// shuffling by (seed, epoch)).
TEST(JobExecutor, OneAndTwoWorkersEndWithTheSameWeights) {
  FakeWorkerServiceClient client;
  v1::JobSpec one_spec = DigitsSpec("equal-1", 2);
  v1::JobSpec two_spec = DigitsSpec("equal-2", 2);
  auto one = MakeExecutor(PartitionOf(one_spec, 0, 1), &client);
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(one->Run().phase(), v1::JobReport::DONE);
  std::vector<std::unique_ptr<JobExecutor>> two;
  for (int w = 0; w < 2; ++w) two.push_back(MakeExecutor(PartitionOf(two_spec, w, 2), &client));
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] { EXPECT_EQ(two[w]->Run().phase(), v1::JobReport::DONE); });
  }
  for (std::thread& t : threads) t.join();
  auto a = checkpoint::CheckpointManager::RestoreLatest(one_spec.checkpoint().dir());
  auto b = checkpoint::CheckpointManager::RestoreLatest(two_spec.checkpoint().dir());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->checkpoint.global_step(), b->checkpoint.global_step());
  // The criterion and why: worker/chief/weights_match.h.
  const absl::Status match = chief::WeightsMatch(a->checkpoint, b->checkpoint);
  EXPECT_TRUE(match.ok()) << match;
}

// Runs worker `rank` of `workers` for attempt `attempt` of `spec` (job uid "restart@1"),
// keeping its checkpoint copies under `state_dir`; `on_step` as JobExecutorOptions'.
std::unique_ptr<JobExecutor> MakeRestartableExecutor(
    const v1::JobSpec& spec, int rank, int workers, int attempt, const std::string& state_dir,
    WorkerServiceClient* client,
    std::function<void(int64_t, const distribute::TrainStepResult&)> on_step = nullptr) {
  v1::Partition p = PartitionOf(spec, rank, workers);
  p.set_attempt(attempt);
  p.set_job_uid("restart@1");
  p.set_rendezvous_prefix(absl::StrCat("jobs/", spec.name(), "/", attempt));
  JobExecutorOptions options;
  options.client = client;
  options.rendezvous_timeout = absl::Seconds(20);
  options.state_dir = state_dir;
  options.on_step = std::move(on_step);
  auto e = JobExecutor::Create(p, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

// Runs every executor on a thread of its own; returns their final reports.
std::vector<v1::JobReport> RunAll(std::vector<std::unique_ptr<JobExecutor>>& executors) {
  std::vector<v1::JobReport> reports(executors.size());
  std::vector<std::thread> threads;
  for (size_t w = 0; w < executors.size(); ++w) {
    threads.emplace_back([&, w] { reports[w] = executors[w]->Run(); });
  }
  for (std::thread& t : threads) t.join();
  return reports;
}

// Variables and optimizer slots, byte for byte.
void ExpectBitwiseEqual(const v1::Checkpoint& a, const v1::Checkpoint& b, const std::string& what) {
  ASSERT_EQ(a.global_step(), b.global_step()) << what;
  ASSERT_EQ(a.variables_size(), b.variables_size()) << what;
  for (int i = 0; i < a.variables_size(); ++i) {
    EXPECT_EQ(a.variables(i).SerializeAsString(), b.variables(i).SerializeAsString())
        << what << ": variable " << a.variables(i).name();
  }
  ASSERT_EQ(a.optimizer_slots_size(), b.optimizer_slots_size()) << what;
  for (int i = 0; i < a.optimizer_slots_size(); ++i) {
    EXPECT_EQ(a.optimizer_slots(i).SerializeAsString(), b.optimizer_slots(i).SerializeAsString())
        << what << ": slot " << a.optimizer_slots(i).name();
  }
}

// The restart promise, in process: two workers over TCP train a model with dropout (its
// masks are keyed by the step) under Adam with a learning-rate schedule; attempt 1 is
// stopped at step k, its chief's checkpoint directory and own copies are then lost (the
// chief's host died), and attempt 2 restores the newest checkpoint worker rank 1 holds,
// sent over the data plane, and ends with variables and optimizer slots bitwise equal to
// an uninterrupted run's. k is just before a checkpoint (39: restores 20), just after one
// (40: restores 40), and between (57: restores 40).
TEST(JobExecutor, ARestartResumesFromTheNewestCopyAndEndsBitwiseEqual) {
  auto make_spec = [](const std::string& name) {
    v1::JobSpec spec = DigitsSpec(name, 0);
    spec.set_steps(90);
    spec.set_eval_every_steps(0);
    spec.mutable_checkpoint()->set_every_steps(20);
    v1::Layer dropout;
    dropout.mutable_dropout()->set_rate(0.25);
    auto* layers = spec.mutable_model()->mutable_layers();
    layers->Add(std::move(dropout));
    layers->SwapElements(layers->size() - 1, layers->size() - 2);  // before the logits
    return spec;
  };
  FakeWorkerServiceClient client;
  const v1::JobSpec reference = make_spec("restart-reference");
  std::vector<std::unique_ptr<JobExecutor>> uninterrupted;
  for (int w = 0; w < 2; ++w) {
    uninterrupted.push_back(MakeRestartableExecutor(
        reference, w, 2, 1, TempDir(absl::StrCat("restart-ref/w", w)), &client));
  }
  for (const v1::JobReport& r : RunAll(uninterrupted)) {
    ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
  }
  auto expected = checkpoint::CheckpointManager::RestoreLatest(reference.checkpoint().dir());
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->checkpoint.global_step(), 90);

  for (const auto& [stop_at, restores] :
       std::vector<std::pair<int, int>>{{39, 20}, {40, 40}, {57, 40}}) {
    const std::string name = absl::StrCat("restart-at-", stop_at);
    const v1::JobSpec spec = make_spec(name);
    const std::string state[2] = {TempDir(name + "/w0"), TempDir(name + "/w1")};
    std::vector<std::unique_ptr<JobExecutor>> first;
    for (int w = 0; w < 2; ++w) {
      first.push_back(MakeRestartableExecutor(
          spec, w, 2, 1, state[w], &client,
          [&first, stop_at = stop_at](int64_t step, const distribute::TrainStepResult&) {
            if (step == stop_at) {
              for (auto& e : first) e->Abort("test: the attempt is stopped");
            }
          }));
    }
    for (const v1::JobReport& r : RunAll(first)) {
      ASSERT_EQ(r.phase(), v1::JobReport::ABORTED) << name << ": " << r.error();
    }
    // The chief's host is gone: its checkpoint directory and its own copies with it.
    ASSERT_EQ(std::system(
                  absl::StrCat("rm -rf '", spec.checkpoint().dir(), "' '", state[0], "'").c_str()),
              0);
    std::vector<std::unique_ptr<JobExecutor>> second;
    for (int w = 0; w < 2; ++w) {
      second.push_back(MakeRestartableExecutor(spec, w, 2, 2, state[w], &client));
    }
    const std::vector<v1::JobReport> reports = RunAll(second);
    for (const v1::JobReport& r : reports) {
      ASSERT_EQ(r.phase(), v1::JobReport::DONE) << name << ": " << r.error();
      EXPECT_EQ(r.restored_step(), restores) << name;
      EXPECT_EQ(r.step(), 90) << name;
    }
    EXPECT_EQ(reports[0].restored_from(), "worker rank 1's copy") << name;
    auto got = checkpoint::CheckpointManager::RestoreLatest(spec.checkpoint().dir());
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    ExpectBitwiseEqual(got->checkpoint, expected->checkpoint, name);
  }
}

// Gradient accumulation end to end: 2 workers x micro-batches of 16 x 2 accumulated give the
// weights of 1 worker with a global batch of 32 (same data order: the shards interleave as
// the global batch's), and a restart of the accumulating job resumes at the checkpoint's
// micro-batch (its input position counts K batches a step) and ends bitwise equal.
TEST(JobExecutor, AccumulatedMicroBatchesMatchOneLargerBatchAndRestartBitwise) {
  FakeWorkerServiceClient client;
  auto make_spec = [](const std::string& name, int64_t batch, int k) {
    v1::JobSpec spec = DigitsSpec(name, 0);
    spec.set_steps(40);  // within one epoch of 32 (each epoch drops its partial batch)
    spec.set_eval_every_steps(0);
    spec.set_global_batch_size(batch);
    spec.mutable_checkpoint()->set_every_steps(10);
    spec.mutable_optimizer()->set_gradient_accumulation_steps(k);
    return spec;
  };
  const v1::JobSpec large = make_spec("accum-large", 32, 1);
  auto one = MakeRestartableExecutor(large, 0, 1, 1, TempDir("accum-large/w0"), &client);
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(one->Run().phase(), v1::JobReport::DONE);
  const v1::JobSpec micro = make_spec("accum-micro", 16, 2);
  std::vector<std::unique_ptr<JobExecutor>> two;
  for (int w = 0; w < 2; ++w) {
    two.push_back(MakeRestartableExecutor(micro, w, 2, 1, TempDir(absl::StrCat("accum-micro/w", w)),
                                          &client));
  }
  for (const v1::JobReport& r : RunAll(two)) {
    ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
    EXPECT_EQ(r.step(), 40);
  }
  auto a = checkpoint::CheckpointManager::RestoreLatest(large.checkpoint().dir());
  auto b = checkpoint::CheckpointManager::RestoreLatest(micro.checkpoint().dir());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->checkpoint.global_step(), 40);
  const absl::Status match = chief::WeightsMatch(a->checkpoint, b->checkpoint);
  EXPECT_TRUE(match.ok()) << match;

  const v1::JobSpec restarted = make_spec("accum-restart", 16, 2);
  const std::string state[2] = {TempDir("accum-restart/w0"), TempDir("accum-restart/w1")};
  std::vector<std::unique_ptr<JobExecutor>> first;
  for (int w = 0; w < 2; ++w) {
    first.push_back(
        MakeRestartableExecutor(restarted, w, 2, 1, state[w], &client,
                                [&first](int64_t step, const distribute::TrainStepResult&) {
                                  if (step == 23) {
                                    for (auto& e : first) e->Abort("test: the attempt is stopped");
                                  }
                                }));
  }
  for (const v1::JobReport& r : RunAll(first)) {
    ASSERT_EQ(r.phase(), v1::JobReport::ABORTED) << r.error();
  }
  std::vector<std::unique_ptr<JobExecutor>> second;
  for (int w = 0; w < 2; ++w) {
    second.push_back(MakeRestartableExecutor(restarted, w, 2, 2, state[w], &client));
  }
  for (const v1::JobReport& r : RunAll(second)) {
    ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
    EXPECT_EQ(r.restored_step(), 20);
  }
  auto c = checkpoint::CheckpointManager::RestoreLatest(restarted.checkpoint().dir());
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectBitwiseEqual(c->checkpoint, b->checkpoint, "accumulating job restarted at step 23");
}

// A preemption: worker 1 is asked to stop (SIGTERM to its lockstepd) during step k; the
// request rides in a step's loss all-reduce, so both workers stop after the same step (k+1
// or k+2, depending on when worker 1 read it), each with its copy of that step's
// checkpoint, and report PREEMPTED; the next attempt resumes from exactly that step and
// ends bitwise equal to an uninterrupted run.
TEST(JobExecutor, APreemptedGroupStopsAfterOneStepWithACheckpointAndResumesThere) {
  FakeWorkerServiceClient client;
  v1::JobSpec reference = DigitsSpec("preempt-reference", 0);
  reference.set_steps(90);
  reference.set_eval_every_steps(0);
  reference.mutable_checkpoint()->set_every_steps(20);
  v1::JobSpec spec = reference;
  spec.set_name("preempt");
  spec.mutable_checkpoint()->set_dir(TempDir("preempt/ckpt"));
  spec.mutable_summaries()->set_dir(TempDir("preempt/tb"));
  std::vector<std::unique_ptr<JobExecutor>> uninterrupted;
  for (int w = 0; w < 2; ++w) {
    uninterrupted.push_back(MakeRestartableExecutor(
        reference, w, 2, 1, TempDir(absl::StrCat("preempt-ref/w", w)), &client));
  }
  for (const v1::JobReport& r : RunAll(uninterrupted)) {
    ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
  }
  auto expected = checkpoint::CheckpointManager::RestoreLatest(reference.checkpoint().dir());
  ASSERT_TRUE(expected.ok()) << expected.status();

  constexpr int kAskedAt = 45;
  std::vector<std::unique_ptr<JobExecutor>> first;
  for (int w = 0; w < 2; ++w) {
    first.push_back(
        MakeRestartableExecutor(spec, w, 2, 1, TempDir(absl::StrCat("preempt/w", w)), &client,
                                [&first](int64_t step, const distribute::TrainStepResult&) {
                                  if (step == kAskedAt)
                                    first[1]->Preempt("lockstepd received SIGTERM");
                                }));
  }
  const std::vector<v1::JobReport> stopped = RunAll(first);
  for (const v1::JobReport& r : stopped) {
    ASSERT_EQ(r.phase(), v1::JobReport::PREEMPTED) << r.error();
  }
  const int64_t at = stopped[0].step();
  EXPECT_EQ(stopped[1].step(), at);
  EXPECT_TRUE(at == kAskedAt + 1 || at == kAskedAt + 2) << at;
  EXPECT_EQ(stopped[1].preemption(), "lockstepd received SIGTERM");
  EXPECT_TRUE(stopped[0].preemption().empty());
  EXPECT_NE(stopped[0].error().find("another worker was preempted"), std::string::npos)
      << stopped[0].error();
  // The chief's checkpoint of that step, and worker 1's own copy.
  EXPECT_TRUE(
      checkpoint::CheckpointManager::ReadFile(
          spec.checkpoint().dir() + "/" + checkpoint::CheckpointManager::FileName(at, "restart@1"))
          .ok());
  EXPECT_TRUE(checkpoint::CheckpointManager::ReadFile(
                  TempDir("preempt/w1") + "/checkpoints/restart@1/" +
                  checkpoint::CheckpointManager::FileName(at, "restart@1"))
                  .ok());
  std::vector<std::unique_ptr<JobExecutor>> second;
  for (int w = 0; w < 2; ++w) {
    second.push_back(
        MakeRestartableExecutor(spec, w, 2, 2, TempDir(absl::StrCat("preempt/w", w)), &client));
  }
  for (const v1::JobReport& r : RunAll(second)) {
    ASSERT_EQ(r.phase(), v1::JobReport::DONE) << r.error();
    EXPECT_EQ(r.restored_step(), at);
  }
  auto got = checkpoint::CheckpointManager::RestoreLatest(spec.checkpoint().dir());
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectBitwiseEqual(got->checkpoint, expected->checkpoint, "preempted");
}

// A corrupt newest copy is skipped (logged) for the one before it, and a checkpoint of
// another job in the same directory is never restored.
TEST(JobExecutor, NewestLocalCheckpointSkipsCorruptAndOtherJobsFiles) {
  const std::string dir = TempDir("newest-local");
  checkpoint::CheckpointManager::Options o;
  o.dir = dir;
  o.keep_last = 5;
  auto manager = checkpoint::CheckpointManager::Create(o);
  ASSERT_TRUE(manager.ok()) << manager.status();
  for (int step : {10, 20, 30}) {
    v1::Checkpoint c;
    c.set_job_uid(step == 30 ? "other@1" : "mine@1");
    c.set_global_step(step);
    ASSERT_TRUE((*manager)->Save(c).ok());
  }
  EXPECT_EQ(NewestLocalCheckpoint({dir}, "mine@1")->checkpoint.global_step(), 20);
  // Truncate step 20: step 10 is the newest that reads back whole.
  const std::string path20 = dir + "/" + checkpoint::CheckpointManager::FileName(20, "mine@1");
  ASSERT_EQ(::truncate(path20.c_str(), 30), 0);
  EXPECT_EQ(NewestLocalCheckpoint({dir}, "mine@1")->checkpoint.global_step(), 10);
  EXPECT_FALSE(NewestLocalCheckpoint({dir + "/absent"}, "mine@1").has_value());
  EXPECT_FALSE(NewestLocalCheckpoint({dir}, "nobody@1").has_value());
}

// Agreement over the store: the highest step wins, from the lowest rank holding it.
TEST(JobExecutor, AgreeOnRestoreTakesTheHighestStepFromTheLowestRank) {
  FakeWorkerServiceClient client;
  const int64_t steps[3] = {20, 40, 40};
  std::vector<absl::StatusOr<RestorePlan>> plans(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      CoordinatorStore store(&client, "jobs/agree/2", Clock::Real());
      plans[r] = AgreeOnRestore(store, r, 3, steps[r], absl::Now() + absl::Seconds(10));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(plans[r].ok()) << plans[r].status();
    EXPECT_EQ(plans[r]->step, 40);
    EXPECT_EQ(plans[r]->source, 1);
  }
  // A rank that never publishes: a bounded wait naming it.
  CoordinatorStore store(&client, "jobs/agree/3", Clock::Real());
  absl::StatusOr<RestorePlan> lonely =
      AgreeOnRestore(store, 0, 2, 10, absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(lonely.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(lonely.status().message().find("worker rank 1"), std::string::npos) << lonely.status();
}

// A restart's checkpoint travels keyed from the attempt's secret, labelled with the step and
// the attempt (a broadcast of another step or attempt does not verify), and bounded by what
// the job's model and optimizer can encode to.
TEST(JobExecutor, TheRestoredCheckpointTravelsAuthenticatedAndBounded) {
  const v1::JobSpec spec = DigitsSpec("restore_blob", 1);
  const v1::Partition p = PartitionOf(spec, 1, 2);
  absl::StatusOr<collectives::BlobOptions> blob = RestoreBlobOptions(p, 300);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->secret, p.secret());
  EXPECT_EQ(blob->label, "the checkpoint of step 300 for jobs/restore_blob/0");
  EXPECT_EQ(blob->max_bytes, *checkpoint::CheckpointBytesBound(spec));
  EXPECT_NE(blob->bound_name.find("checkpoint bound"), std::string::npos);
  v1::Partition no_model = p;
  no_model.mutable_spec()->clear_model();
  const absl::Status refused = RestoreBlobOptions(no_model, 300).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("bounding the checkpoints it can restore"), std::string::npos)
      << refused;
}

TEST(JobExecutor, AbortMidTrainingReturnsAtOnce) {
  FakeWorkerServiceClient client;
  v1::JobSpec spec = DigitsSpec("abort", 1);
  spec.set_epochs(0);
  spec.set_steps(1000000);
  auto executor = MakeExecutor(PartitionOf(spec, 0, 1), &client);
  ASSERT_NE(executor, nullptr);
  v1::JobReport report;
  std::thread runner([&] { report = executor->Run(); });
  ASSERT_TRUE(WaitForStep(*executor, 5, absl::Seconds(20)));
  const absl::Time start = absl::Now();
  executor->Abort("cancelled by the test");
  runner.join();
  EXPECT_LT(absl::Now() - start, kFailFastBound);
  EXPECT_EQ(report.phase(), v1::JobReport::ABORTED);
  EXPECT_NE(report.error().find("cancelled by the test"), std::string::npos) << report.error();
}

// The flight records of a two-worker group with worker 1 held in its input at step 5 by a
// test hook: worker 0 waits in a collective worker 1 never entered; the job log says so;
// Abort ends the stall.
TEST(JobExecutor, FlightRecordsShowWhoNeverEnteredTheCollective) {
  FakeWorkerServiceClient client;
  v1::JobSpec spec = DigitsSpec("stall", 1);
  spec.set_epochs(0);
  spec.set_steps(1000000);
  std::vector<std::unique_ptr<JobExecutor>> executors;
  executors.push_back(MakeExecutor(PartitionOf(spec, 0, 2), &client));
  executors.push_back(
      MakeExecutor(PartitionOf(spec, 1, 2), &client, *ParseTestHooks("stall=input@5")));
  ASSERT_NE(executors[0], nullptr);
  ASSERT_NE(executors[1], nullptr);
  std::vector<v1::JobReport> reports(2);
  std::vector<std::thread> runners;
  for (int w = 0; w < 2; ++w) runners.emplace_back([&, w] { reports[w] = executors[w]->Run(); });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  v1::JobDiagnostics waiting, stalled;
  while (absl::Now() < deadline) {
    waiting = executors[0]->diagnostics();
    stalled = executors[1]->diagnostics();
    const v1::FlightRecord& r = waiting.record();
    // Settled: worker 0 in the collective after the last one worker 1 entered.
    if (stalled.record().phase() == v1::PHASE_INPUT && stalled.record().step() == 5 &&
        r.last_seq_left() < r.last_seq_entered() &&
        r.last_seq_entered() == stalled.record().last_seq_entered() + 1) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  const v1::FlightRecord& w0 = waiting.record();
  const v1::FlightRecord& w1 = stalled.record();
  ASSERT_EQ(w1.phase(), v1::PHASE_INPUT) << w1.DebugString();
  EXPECT_EQ(w1.step(), 5);
  ASSERT_GT(w0.collectives_size(), 0) << w0.DebugString();
  const v1::CollectiveRecord& open = w0.collectives(w0.collectives_size() - 1);
  EXPECT_EQ(open.left_unix_micros(), 0) << "worker 0 waits in #" << open.seq();
  EXPECT_EQ(open.seq(), w1.last_seq_entered() + 1);
  EXPECT_GT(open.bytes(), 0);
  EXPECT_EQ(w0.worker_rank(), 0);
  EXPECT_EQ(w1.worker_rank(), 1);
  EXPECT_EQ(w0.job_id(), "stall");
  bool hook_logged = false;
  for (const v1::LogLine& line : stalled.log_lines()) {
    hook_logged |= line.text().find("LOCKSTEP_TEST_HOOKS") != std::string::npos;
  }
  EXPECT_TRUE(hook_logged);
  for (auto& e : executors) e->Abort("test over");
  for (std::thread& t : runners) t.join();
  EXPECT_EQ(reports[1].phase(), v1::JobReport::ABORTED) << reports[1].error();
  EXPECT_TRUE(executors[1]->diagnostics().finished());
  EXPECT_EQ(executors[1]->diagnostics().record().phase(), v1::PHASE_FINISHED);
}

TEST(JobExecutor, AbortDuringRendezvousReturnsAtOnce) {
  FakeWorkerServiceClient client;
  v1::JobSpec spec = DigitsSpec("abort-rendezvous", 1);
  // Worker 1 of 2 never shows up: worker 0 waits in the rendezvous until aborted.
  auto executor = MakeExecutor(PartitionOf(spec, 0, 2), &client);
  ASSERT_NE(executor, nullptr);
  v1::JobReport report;
  std::thread runner([&] { report = executor->Run(); });
  const absl::Time wait_deadline = absl::Now() + absl::Seconds(10);
  while (client.calls("GetKey") == 0 && absl::Now() < wait_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Time start = absl::Now();
  executor->Abort("cancelled during rendezvous");
  runner.join();
  EXPECT_LT(absl::Now() - start, kFailFastBound) << "a missed abort waits out the rendezvous";
  EXPECT_EQ(report.phase(), v1::JobReport::ABORTED) << report.error();
}

TEST(JobExecutor, PeerLostMakesTheOtherFailFastNamingIt) {
  FakeWorkerServiceClient client;
  v1::JobSpec spec = DigitsSpec("peer-lost", 1);
  spec.set_epochs(0);
  spec.set_steps(1000000);
  std::vector<std::unique_ptr<JobExecutor>> executors;
  for (int w = 0; w < 2; ++w) executors.push_back(MakeExecutor(PartitionOf(spec, w, 2), &client));
  ASSERT_NE(executors[0], nullptr);
  ASSERT_NE(executors[1], nullptr);
  std::vector<v1::JobReport> reports(2);
  std::vector<absl::Time> ended(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      reports[w] = executors[w]->Run();
      ended[w] = absl::Now();
    });
  }
  const bool started = WaitForStep(*executors[0], 5, absl::Seconds(20));
  // Worker 1 goes away: its collectives end and its sockets close.
  executors[1]->Abort("worker 1 is going away");
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(started);
  EXPECT_EQ(reports[1].phase(), v1::JobReport::ABORTED);
  EXPECT_EQ(reports[0].phase(), v1::JobReport::FAILED) << reports[0].error();
  EXPECT_LT(ended[0] - ended[1], kFailFastBound) << "worker 0 did not fail fast";
  EXPECT_NE(reports[0].error().find("rank"), std::string::npos) << reports[0].error();
  std::cerr << "worker 0's error: " << reports[0].error() << "\n";
}

}  // namespace
}  // namespace lockstep::worker

// LowerJobSpec: one table walks every rule once (each refusal names its field first), then
// the decisions: defaults filled, AUTO resolved per replica kind, the input's evaluation data.
#include "jobspec/lower.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "jobspec/test_jobs.h"

namespace lockstep {
namespace jobspec {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Two CPU workers with two devices each.
ClusterFacts TwoCpuWorkers() {
  ClusterFacts facts;
  facts.workers = {WorkerFacts{2, 0}, WorkerFacts{2, 0}};
  facts.heartbeat_timeout = absl::Seconds(5);
  return facts;
}

// data.train as TFRECORD: feature "x" ([8] floats, model.input_shape) and label "y".
v1::TfRecordSpec& TfRecord(v1::JobSpec& s) {
  v1::DataSource& train = *s.mutable_data()->mutable_train();
  train.set_format(v1::DataSource::TFRECORD);
  v1::TfRecordSpec& t = *train.mutable_tfrecord();
  v1::TfRecordFeature& x = *t.add_features();
  x.set_name("x");
  x.add_shape(8);
  x.set_dtype(v1::TfRecordFeature::FLOAT);
  t.mutable_label()->set_name("y");
  t.mutable_label()->set_dtype(v1::TfRecordFeature::INT64);
  return t;
}

struct Rule {
  std::string field;  // what the message starts with, before ": "
  std::function<void(v1::JobSpec&, ClusterFacts&)> breaks;
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
};

using S = v1::JobSpec;
using F = ClusterFacts;

// Every rule of rules.cc and lower.cc, each broken alone on an otherwise accepted job.
std::vector<Rule> Rules() {
  return {
      {"strategy", [](S& s, F&) { s.set_strategy(static_cast<v1::StrategyKind>(42)); }},
      {"num_workers", [](S& s, F&) { s.set_num_workers(-1); }},
      {"num_workers",
       [](S& s, F&) {
         s.set_strategy(v1::MIRRORED);
         s.set_num_workers(2);
       }},
      {"model", [](S& s, F&) { s.clear_model(); }},
      {"model.layers[0].dense.units",
       [](S& s, F&) { s.mutable_model()->mutable_layers(0)->mutable_dense()->set_units(0); }},
      {"model.inputs",
       [](S& s, F&) {
         s.mutable_model()->clear_input_shape();
         v1::ModelInput* in = s.mutable_model()->add_inputs();
         in->set_name("features");
         in->add_shape(8);
       }},
      {"optimizer", [](S& s, F&) { s.clear_optimizer(); }},
      {"optimizer.learning_rate.schedule",
       [](S& s, F&) { s.mutable_optimizer()->clear_learning_rate(); }},
      {"data.train", [](S& s, F&) { s.mutable_data()->clear_train(); }},
      {"data.train.format",
       [](S& s, F&) { s.mutable_data()->mutable_train()->set_format(v1::DataSource::RECORDS); }},
      {"data.train.format",
       [](S& s, F&) {
         s.mutable_data()->mutable_train()->set_format(static_cast<v1::DataSource::Format>(9));
       }},
      {"data.train.tfrecord",
       [](S& s, F&) { s.mutable_data()->mutable_train()->set_format(v1::DataSource::TFRECORD); }},
      {"data.train.tfrecord",
       [](S& s, F&) { s.mutable_data()->mutable_train()->mutable_tfrecord(); }},
      {"data.train.tfrecord.features", [](S& s, F&) { TfRecord(s).clear_features(); }},
      {"data.train.tfrecord.features[0].name",
       [](S& s, F&) { TfRecord(s).mutable_features(0)->clear_name(); }},
      {"data.train.tfrecord.features[0].shape[0]",
       [](S& s, F&) { TfRecord(s).mutable_features(0)->set_shape(0, 0); }},
      {"data.train.tfrecord.features[0].dtype",
       [](S& s, F&) { TfRecord(s).mutable_features(0)->clear_dtype(); }},
      {"data.train.tfrecord.features[1].name",
       [](S& s, F&) {
         v1::TfRecordSpec& t = TfRecord(s);
         *t.add_features() = t.features(0);
       }},
      {"data.train.tfrecord.features",
       [](S& s, F&) { TfRecord(s).mutable_features(0)->set_shape(0, 9); }},
      {"data.train.tfrecord.label", [](S& s, F&) { TfRecord(s).clear_label(); }},
      {"data.train.tfrecord.label.shape",
       [](S& s, F&) { TfRecord(s).mutable_label()->add_shape(2); }},
      {"data.train.synthetic_examples",
       [](S& s, F&) {
         s.mutable_data()->mutable_train()->clear_files();
         s.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
       }},
      {"data.train.files", [](S& s, F&) { s.mutable_data()->mutable_train()->clear_files(); }},
      {"data.train.files[0]",
       [](S& s, F&) { s.mutable_data()->mutable_train()->set_files(0, "../up.csv"); }},
      {"data.train.feature_scale",
       [](S& s, F&) { s.mutable_data()->mutable_train()->set_feature_scale(-1); }},
      {"data.eval.format",
       [](S& s, F&) {
         s.set_epochs(0);
         s.set_steps(10);
         s.mutable_data()->mutable_eval()->set_format(v1::DataSource::SYNTHETIC);
         s.mutable_data()->mutable_eval()->set_synthetic_examples(8);
       }},
      {"data.eval_fraction", [](S& s, F&) { s.mutable_data()->set_eval_fraction(1.5); }},
      {"evaluator.enabled",
       [](S& s, F&) {
         s.set_epochs(0);
         s.set_steps(10);
         s.mutable_data()->set_eval_fraction(0);
         s.mutable_evaluator()->set_enabled(true);
       }},
      {"global_batch_size", [](S& s, F&) { s.set_global_batch_size(0); }},
      {"steps, epochs", [](S& s, F&) { s.set_steps(10); }},
      {"epochs", [](S& s, F&) { s.mutable_data()->mutable_eval()->add_files("data/eval.csv"); }},
      {"epochs", [](S& s, F&) { s.mutable_data()->set_eval_fraction(0); }},
      {"epochs",
       [](S& s, F&) {
         s.mutable_data()->mutable_train()->clear_files();
         s.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
         s.mutable_data()->mutable_train()->set_synthetic_examples(10);  // < one batch of 64
       }},
      {"eval_every_steps", [](S& s, F&) { s.set_eval_every_steps(-1); }},
      {"checkpoint.every_steps", [](S& s, F&) { s.mutable_checkpoint()->set_every_steps(-1); }},
      {"checkpoint.keep", [](S& s, F&) { s.mutable_checkpoint()->set_keep(-1); }},
      {"checkpoint.dir", [](S& s, F&) { s.mutable_checkpoint()->set_dir("a/../../b"); }},
      {"summaries.dir", [](S& s, F&) { s.mutable_summaries()->set_dir("../tb"); }},
      {"summaries.every_steps", [](S& s, F&) { s.mutable_summaries()->set_every_steps(-1); }},
      {"init_from.path",
       [](S& s, F&) { s.mutable_init_from()->set_format(v1::InitFrom::SAFETENSORS); }},
      {"init_from.format", [](S& s, F&) { s.mutable_init_from()->set_path("w.safetensors"); }},
      {"communication.bytes_per_pack",
       [](S& s, F&) { s.mutable_communication()->set_bytes_per_pack(-1); }},
      {"communication.timeout_ms", [](S& s, F&) { s.mutable_communication()->set_timeout_ms(-1); }},
      {"communication.encrypt",
       [](S& s, F&) {
         s.set_strategy(v1::MIRRORED);
         s.mutable_communication()->set_encrypt(true);
       }},
      {"communication.compression",
       [](S& s, F&) {
         s.mutable_communication()->set_compression(
             static_cast<v1::CommunicationSpec::Compression>(7));
       }},
      {"communication.compression",
       [](S& s, F&) {
         s.set_strategy(v1::CENTRAL_STORAGE);
         s.mutable_communication()->set_compression(v1::CommunicationSpec::BF16);
       }},
      {"restart_policy.max_restarts",
       [](S& s, F&) { s.mutable_restart_policy()->set_max_restarts(-1); }},
      {"checkpoint.copies", [](S& s, F&) { s.mutable_checkpoint()->set_copies(-1); }},
      {"restart_policy.min_workers",
       [](S& s, F&) { s.mutable_restart_policy()->set_min_workers(-1); }},
      {"restart_policy.max_workers",
       [](S& s, F&) { s.mutable_restart_policy()->set_max_workers(-1); }},
      {"restart_policy.replacement_timeout_ms",
       [](S& s, F&) { s.mutable_restart_policy()->set_replacement_timeout_ms(-1); }},
      {"restart_policy.min_workers",
       [](S& s, F&) {
         s.mutable_restart_policy()->set_min_workers(3);
         s.mutable_restart_policy()->set_max_workers(2);
       }},
      {"restart_policy.min_workers",
       [](S& s, F&) {
         s.set_strategy(v1::MIRRORED);
         s.mutable_restart_policy()->set_min_workers(1);
       }},
      {"restart_policy.min_workers",
       [](S& s, F&) { s.mutable_restart_policy()->set_min_workers(1); }},
      {"restart_policy.min_workers",
       [](S& s, F&) {
         s.set_num_workers(2);
         s.mutable_restart_policy()->set_min_workers(3);
         s.mutable_restart_policy()->set_max_restarts(1);
         s.mutable_checkpoint()->set_every_steps(10);
       }},
      {"checkpoint.every_steps", [](S& s, F&) { s.mutable_restart_policy()->set_max_restarts(2); }},
      // Rules that need the cluster (lower.cc).
      {"global_batch_size", [](S& s, F&) { s.set_global_batch_size(6); }},  // 4 replicas
      {"model", [](S&, F& f) { f.limits.max_model_parameters = 10; },
       absl::StatusCode::kResourceExhausted},
      {"model", [](S&, F& f) { f.limits.max_model_bytes = 16; },
       absl::StatusCode::kResourceExhausted},
      {"global_batch_size", [](S&, F& f) { f.limits.max_batch_bytes = 16; },
       absl::StatusCode::kResourceExhausted},
      {"restart_policy.replacement_timeout_ms",
       [](S& s, F&) {
         s.mutable_restart_policy()->set_min_workers(1);
         s.mutable_restart_policy()->set_max_restarts(1);
         s.mutable_checkpoint()->set_every_steps(10);
         s.mutable_restart_policy()->set_replacement_timeout_ms(1000);
       }},
      {"restart_policy.min_workers",
       [](S& s, F&) {
         s.set_num_workers(4);            // 2 known: the batch split waits for scheduling
         s.set_global_batch_size(3 * 5);  // no count of 2-device workers splits it
         s.mutable_restart_policy()->set_min_workers(1);
         s.mutable_restart_policy()->set_max_restarts(1);
         s.mutable_checkpoint()->set_every_steps(10);
         s.mutable_restart_policy()->set_max_workers(2);
       }},
      {"gpus", [](S& s, F&) { s.set_gpus(true); }},
      {"communication.implementation",
       [](S& s, F&) {
         s.mutable_communication()->set_implementation(v1::CommunicationSpec::NCCL);
       }},
      {"communication.implementation",
       [](S& s, F& f) {
         f.workers[0].gpus = 2;
         f.workers[1].gpus = 2;
         s.set_gpus(true);
         s.mutable_communication()->set_implementation(v1::CommunicationSpec::RING);
       }},
  };
}

TEST(LowerJobSpec, EveryRuleRefusesNamingItsField) {
  ASSERT_TRUE(LowerJobSpec(SmallCsvJob(), TwoCpuWorkers()).ok())
      << LowerJobSpec(SmallCsvJob(), TwoCpuWorkers()).status();
  int i = 0;
  for (const Rule& rule : Rules()) {
    v1::JobSpec spec = SmallCsvJob();
    ClusterFacts facts = TwoCpuWorkers();
    rule.breaks(spec, facts);
    const absl::StatusOr<v1::JobPlan> plan = LowerJobSpec(spec, facts);
    ASSERT_FALSE(plan.ok()) << "rule " << i << " (" << rule.field << ") accepted";
    EXPECT_EQ(plan.status().code(), rule.code) << "rule " << i << ": " << plan.status();
    EXPECT_THAT(std::string(plan.status().message()), StartsWith(rule.field + ": "))
        << "rule " << i;
    ++i;
  }
}

TEST(LowerJobSpec, FillsEveryDefault) {
  absl::StatusOr<v1::JobPlan> plan = LowerJobSpec(SmallCsvJob(), TwoCpuWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->version(), kPlanVersion);
  EXPECT_EQ(plan->strategy(), v1::MULTI_WORKER_MIRRORED);
  EXPECT_EQ(plan->workers(), 0);  // every ALIVE training worker
  EXPECT_EQ(plan->devices().kind(), v1::DevicePlan::CPU);
  EXPECT_EQ(plan->devices().per_worker(), 0);
  EXPECT_EQ(plan->communication().backend(), v1::CommunicationPlan::LOCKSTEP);
  EXPECT_EQ(plan->communication().bytes_per_pack(), 4 << 20);
  EXPECT_EQ(plan->communication().timeout_ms(), 60000);
  EXPECT_TRUE(plan->communication().hierarchical());
  EXPECT_TRUE(plan->communication().shm_heap());
  EXPECT_FALSE(plan->communication().encrypt());
  EXPECT_FALSE(plan->communication().bf16_compression());
  EXPECT_EQ(plan->input().eval(), v1::InputPlan::HELD_OUT);
  EXPECT_DOUBLE_EQ(plan->input().eval_fraction(), 0.2);
  EXPECT_EQ(plan->input().auto_shard_policy(), v1::AUTO);
  EXPECT_TRUE(plan->input().shuffle());
  EXPECT_EQ(plan->checkpoint().keep(), 5);
  EXPECT_EQ(plan->checkpoint().every_steps(), 0);
  EXPECT_EQ(plan->summary_every_steps(), 10);
  EXPECT_EQ(plan->restart().max_restarts(), 0);
  EXPECT_EQ(plan->restart().min_workers(), 0);
  EXPECT_EQ(plan->restart().max_workers(), 0);  // every ALIVE training worker
  EXPECT_EQ(plan->restart().replacement_timeout_ms(), 10000);

  v1::JobSpec given = SmallCsvJob();
  given.set_strategy(v1::ONE_DEVICE);
  given.set_epochs(0);
  given.set_steps(5);
  given.mutable_data()->mutable_eval()->add_files("data/eval.csv");
  given.mutable_data()->set_auto_shard_policy(v1::FILE);
  given.mutable_data()->set_no_shuffle(true);
  given.mutable_communication()->set_timeout_ms(1500);
  given.mutable_communication()->set_bytes_per_pack(1024);
  given.mutable_communication()->set_flat(true);
  given.mutable_checkpoint()->set_keep(2);
  given.mutable_summaries()->set_every_steps(3);
  plan = LowerJobSpec(given, TwoCpuWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->strategy(), v1::ONE_DEVICE);
  EXPECT_EQ(plan->workers(), 1);
  EXPECT_EQ(plan->devices().per_worker(), 1);
  EXPECT_EQ(plan->communication().timeout_ms(), 1500);
  EXPECT_EQ(plan->communication().bytes_per_pack(), 1024);
  EXPECT_FALSE(plan->communication().hierarchical());
  EXPECT_EQ(plan->input().eval(), v1::InputPlan::SOURCE);
  EXPECT_EQ(plan->input().auto_shard_policy(), v1::FILE);
  EXPECT_FALSE(plan->input().shuffle());
  EXPECT_EQ(plan->checkpoint().keep(), 2);
  EXPECT_EQ(plan->summary_every_steps(), 3);

  v1::JobSpec none = given;
  none.mutable_data()->clear_eval();
  none.mutable_data()->set_eval_fraction(0);
  plan = LowerJobSpec(none, TwoCpuWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->input().eval(), v1::InputPlan::NONE);

  v1::JobSpec elastic = SmallCsvJob();
  elastic.set_num_workers(2);
  elastic.mutable_checkpoint()->set_every_steps(5);
  elastic.mutable_restart_policy()->set_max_restarts(3);
  elastic.mutable_restart_policy()->set_min_workers(1);
  plan = LowerJobSpec(elastic, TwoCpuWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->restart().max_restarts(), 3);
  EXPECT_EQ(plan->restart().min_workers(), 1);
  EXPECT_EQ(plan->restart().max_workers(), 2);  // num_workers
  EXPECT_EQ(plan->restart().replacement_timeout_ms(), 10000);
  elastic.mutable_restart_policy()->set_max_workers(4);
  elastic.mutable_restart_policy()->set_replacement_timeout_ms(20000);
  plan = LowerJobSpec(elastic, TwoCpuWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->restart().max_workers(), 4);
  EXPECT_EQ(plan->restart().replacement_timeout_ms(), 20000);
}

// A plan stored by an older coordinator is brought to this version: what it decided is kept,
// the sections it did not have are decided from its spec; a newer or unversioned plan is
// refused naming both versions.
TEST(UpgradePlan, FillsWhatAnOlderLoweringLeftOutAndRefusesANewerPlan) {
  v1::JobSpec spec = SmallCsvJob();
  spec.set_num_workers(2);
  spec.mutable_checkpoint()->set_every_steps(5);
  spec.mutable_restart_policy()->set_max_restarts(2);
  spec.mutable_restart_policy()->set_min_workers(1);
  absl::StatusOr<v1::JobPlan> now = LowerJobSpec(spec, TwoCpuWorkers());
  ASSERT_TRUE(now.ok()) << now.status();
  v1::JobPlan v1_plan = *now;  // as version 1 wrote it: no restart section
  v1_plan.set_version(1);
  v1_plan.clear_restart();
  v1_plan.mutable_checkpoint()->set_keep(7);  // a decision of its own, kept
  absl::StatusOr<v1::JobPlan> upgraded = UpgradePlan(v1_plan, spec);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status();
  EXPECT_EQ(upgraded->version(), kPlanVersion);
  EXPECT_EQ(upgraded->checkpoint().keep(), 7);
  EXPECT_EQ(upgraded->restart().SerializeAsString(), now->restart().SerializeAsString());
  // A current plan is taken as it is (its restart section is not decided again).
  v1::JobPlan current = *now;
  current.mutable_restart()->set_max_restarts(9);
  upgraded = UpgradePlan(current, spec);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status();
  EXPECT_EQ(upgraded->restart().max_restarts(), 9);

  v1::JobPlan newer = *now;
  newer.set_version(kPlanVersion + 1);
  absl::Status refused = UpgradePlan(newer, spec).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr(absl::StrCat("version ", kPlanVersion + 1)));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("stored by a newer coordinator"));
  v1::JobPlan unversioned = *now;
  unversioned.set_version(0);
  EXPECT_EQ(UpgradePlan(unversioned, spec).status().code(), absl::StatusCode::kFailedPrecondition);
}

// AUTO is resolved here, once: NCCL for GPU replicas, Lockstep's collectives for CPU ones.
TEST(LowerJobSpec, ResolvesTheCollectiveBackendPerReplicaKind) {
  ClusterFacts mixed = TwoCpuWorkers();
  mixed.workers[1].gpus = 2;
  for (const auto implementation :
       {v1::CommunicationSpec::AUTO, v1::CommunicationSpec::IMPLEMENTATION_UNSPECIFIED}) {
    v1::JobSpec cpu = SmallCsvJob();
    cpu.mutable_communication()->set_implementation(implementation);
    absl::StatusOr<v1::JobPlan> plan = LowerJobSpec(cpu, mixed);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->communication().backend(), v1::CommunicationPlan::LOCKSTEP);
    EXPECT_EQ(plan->devices().kind(), v1::DevicePlan::CPU);  // a GPU host offers its CPU too
    v1::JobSpec gpu = cpu;
    gpu.set_gpus(true);
    gpu.set_global_batch_size(24);  // 1 + 2 replicas
    plan = LowerJobSpec(gpu, mixed);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->communication().backend(), v1::CommunicationPlan::NCCL);
    EXPECT_EQ(plan->devices().kind(), v1::DevicePlan::GPU);
  }
  v1::JobSpec ring = SmallCsvJob();
  ring.mutable_communication()->set_implementation(v1::CommunicationSpec::RING);
  absl::StatusOr<v1::JobPlan> plan = LowerJobSpec(ring, TwoCpuWorkers());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->communication().backend(), v1::CommunicationPlan::LOCKSTEP_RING);
  v1::JobSpec nccl = SmallCsvJob();
  nccl.set_gpus(true);
  nccl.set_global_batch_size(24);
  nccl.mutable_communication()->set_implementation(v1::CommunicationSpec::NCCL);
  plan = LowerJobSpec(nccl, mixed);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->communication().backend(), v1::CommunicationPlan::NCCL);
}

TEST(LowerJobSpec, GpuMessagesCountTheWorkersAndSayHowToOfferGpus) {
  v1::JobSpec gpu = SmallCsvJob();
  gpu.set_gpus(true);
  absl::Status none = LowerJobSpec(gpu, TwoCpuWorkers()).status();
  EXPECT_THAT(std::string(none.message()), StartsWith("gpus: the job asks for GPU replicas"));
  EXPECT_THAT(std::string(none.message()), HasSubstr("none of the 2 ALIVE training worker(s)"));
  v1::JobSpec nccl = SmallCsvJob();
  nccl.mutable_communication()->set_implementation(v1::CommunicationSpec::NCCL);
  absl::Status cpu = LowerJobSpec(nccl, TwoCpuWorkers()).status();
  EXPECT_THAT(std::string(cpu.message()), HasSubstr("set `gpus: true`"));
  // With no worker known yet the batch split waits for scheduling; the rest is decided.
  EXPECT_TRUE(LowerJobSpec(SmallCsvJob(), ClusterFacts{}).ok());
  EXPECT_EQ(LowerJobSpec(gpu, ClusterFacts{}).status().code(), absl::StatusCode::kInvalidArgument);
  // A stored job lowered again (accepted against the workers before): today's workers are
  // not asked again, the spec's own rules and the decisions are.
  ClusterFacts stored;
  stored.check_workers = false;
  absl::StatusOr<v1::JobPlan> again = LowerJobSpec(gpu, stored);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->communication().backend(), v1::CommunicationPlan::NCCL);
  v1::JobSpec bad = gpu;
  bad.set_global_batch_size(0);
  EXPECT_THAT(std::string(LowerJobSpec(bad, stored).status().message()),
              StartsWith("global_batch_size: "));
}

TEST(LowerJobSpec, OneWorkerFactsAreAJobTrainedInOneProcess) {
  const ClusterFacts three = ClusterFacts::OneWorker(3);
  ASSERT_EQ(three.workers.size(), 1u);
  absl::Status split = LowerJobSpec(SmallCsvJob(), three).status();
  EXPECT_THAT(std::string(split.message()), StartsWith("global_batch_size: 64 is not divisible"));
  EXPECT_TRUE(LowerJobSpec(SmallCsvJob(), ClusterFacts::OneWorker(4)).ok());
  v1::JobSpec gpu = SmallCsvJob();
  gpu.set_gpus(true);
  EXPECT_TRUE(LowerJobSpec(gpu, ClusterFacts::OneWorker(2, /*gpus=*/true)).ok());
}

}  // namespace
}  // namespace jobspec
}  // namespace lockstep

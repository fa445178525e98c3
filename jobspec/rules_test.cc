#include "jobspec/rules.h"

#include <functional>
#include <string>
#include <utility>

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

// CsvJob's model (input [8]) on TFRecord files, the data source written as users write it.
v1::JobSpec TfRecordJob() {
  v1::JobSpec spec = SmallCsvJob();
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      R"({"files": ["data/train-0.tfrecord", "data/train-1.tfrecord"], "format": "TFRECORD",
          "tfrecord": {"features": [{"name": "pixels", "shape": [2, 3], "dtype": "FLOAT"},
                                    {"name": "ids", "shape": [2], "dtype": "INT64"}],
                       "label": {"name": "label", "dtype": "INT64"}}})",
      spec.mutable_data()->mutable_train());
  EXPECT_TRUE(parsed.ok()) << parsed;
  return spec;
}

// The message of an INVALID_ARGUMENT refusal ("" and a test failure otherwise).
std::string Refusal(const v1::JobSpec& spec) {
  absl::Status s = CheckSpecRules(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(SpecRulesTest, AcceptsRunnableSpecs) {
  EXPECT_TRUE(CheckSpecRules(SmallCsvJob()).ok()) << CheckSpecRules(SmallCsvJob());
  v1::JobSpec steps = SmallCsvJob();  // streamed files with an eval source: fine with steps
  steps.set_epochs(0);
  steps.set_steps(100);
  steps.mutable_data()->set_eval_fraction(0);
  steps.mutable_data()->mutable_eval()->add_files("data/eval.csv");
  EXPECT_TRUE(CheckSpecRules(steps).ok()) << CheckSpecRules(steps);
  v1::JobSpec synthetic = SmallCsvJob();
  synthetic.mutable_data()->clear_train();
  synthetic.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  synthetic.mutable_data()->mutable_train()->set_synthetic_examples(640);
  EXPECT_TRUE(CheckSpecRules(synthetic).ok()) << CheckSpecRules(synthetic);
  v1::JobSpec ring = SmallCsvJob();
  ring.mutable_communication()->set_implementation(v1::CommunicationSpec::RING);
  EXPECT_TRUE(CheckSpecRules(ring).ok()) << CheckSpecRules(ring);
}

TEST(SpecRulesTest, EpochsNeedAKnownEpochSize) {
  v1::JobSpec with_eval = SmallCsvJob();
  with_eval.mutable_data()->mutable_eval()->add_files("data/eval.csv");
  EXPECT_THAT(Refusal(with_eval), StartsWith("epochs: with a data.eval source"));
  EXPECT_THAT(Refusal(with_eval), HasSubstr("give steps instead"));

  v1::JobSpec streamed = SmallCsvJob();
  streamed.mutable_data()->set_eval_fraction(0);
  EXPECT_THAT(Refusal(streamed), StartsWith("epochs: with data.eval_fraction 0"));
  EXPECT_THAT(Refusal(streamed), HasSubstr("give steps instead"));

  v1::JobSpec tiny = SmallCsvJob();
  tiny.mutable_data()->clear_train();
  tiny.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  tiny.mutable_data()->mutable_train()->set_synthetic_examples(63);
  EXPECT_THAT(Refusal(tiny), StartsWith("epochs: data.train has 63 synthetic examples"));
}

TEST(SpecRulesTest, RefusesWhatTheWorkersCannotRun) {
  v1::JobSpec records = SmallCsvJob();
  records.mutable_data()->mutable_train()->set_format(v1::DataSource::RECORDS);
  EXPECT_THAT(Refusal(records), StartsWith("data.train.format: RECORDS is not supported"));

  v1::JobSpec eval_records = SmallCsvJob();
  eval_records.mutable_data()->mutable_eval()->add_files("data/eval.bin");
  eval_records.mutable_data()->mutable_eval()->set_format(v1::DataSource::RECORDS);
  EXPECT_THAT(Refusal(eval_records), StartsWith("data.eval.format: RECORDS is not supported"));

  v1::JobSpec eval_synthetic = SmallCsvJob();
  eval_synthetic.mutable_data()->mutable_eval()->set_format(v1::DataSource::SYNTHETIC);
  eval_synthetic.mutable_data()->mutable_eval()->set_synthetic_examples(10);
  EXPECT_THAT(Refusal(eval_synthetic), StartsWith("data.eval.format: SYNTHETIC"));

  v1::JobSpec init_from = SmallCsvJob();
  init_from.mutable_init_from()->set_path("models/digits.safetensors");
  EXPECT_THAT(Refusal(init_from), StartsWith("init_from.format: missing or unknown: SAFETENSORS"));
  init_from.mutable_init_from()->set_format(v1::InitFrom::SAFETENSORS);
  EXPECT_TRUE(CheckSpecRules(init_from).ok());
  init_from.mutable_init_from()->set_path("");
  EXPECT_THAT(Refusal(init_from), StartsWith("init_from.path: empty path"));
  init_from.mutable_init_from()->set_path("../digits.safetensors");
  EXPECT_THAT(Refusal(init_from), StartsWith("init_from.path: '../digits.safetensors' has a '..'"));

  // NCCL depends on the workers' GPUs: lower_test.cc.
  v1::JobSpec encrypted_mirrored = SmallCsvJob();
  encrypted_mirrored.set_strategy(v1::MIRRORED);
  encrypted_mirrored.mutable_communication()->set_encrypt(true);
  EXPECT_THAT(Refusal(encrypted_mirrored),
              StartsWith("communication.encrypt: encrypts the TCP traffic between workers, but "
                         "MIRRORED runs on one worker"));
  v1::JobSpec encrypted = SmallCsvJob();
  encrypted.set_strategy(v1::MULTI_WORKER_MIRRORED);
  encrypted.mutable_communication()->set_encrypt(true);
  EXPECT_TRUE(CheckSpecRules(encrypted).ok()) << CheckSpecRules(encrypted);

  for (v1::StrategyKind one_worker : {v1::ONE_DEVICE, v1::MIRRORED, v1::CENTRAL_STORAGE}) {
    v1::JobSpec compressed = SmallCsvJob();
    compressed.set_strategy(one_worker);
    compressed.mutable_communication()->set_compression(v1::CommunicationSpec::BF16);
    EXPECT_THAT(Refusal(compressed),
                StartsWith(absl::StrCat("communication.compression: BF16 halves the gradients "
                                        "that workers exchange, but ",
                                        v1::StrategyKind_Name(one_worker), " runs on one worker")));
    compressed.mutable_communication()->set_compression(v1::CommunicationSpec::NONE);
    EXPECT_TRUE(CheckSpecRules(compressed).ok()) << CheckSpecRules(compressed);
  }
  v1::JobSpec unknown_compression = SmallCsvJob();
  unknown_compression.mutable_communication()->set_compression(
      static_cast<v1::CommunicationSpec::Compression>(7));
  EXPECT_THAT(Refusal(unknown_compression),
              StartsWith("communication.compression: 7 is not a compression"));
  for (v1::StrategyKind multi : {v1::MULTI_WORKER_MIRRORED, v1::STRATEGY_KIND_UNSPECIFIED}) {
    v1::JobSpec compressed = SmallCsvJob();
    compressed.set_strategy(multi);
    compressed.mutable_communication()->set_compression(v1::CommunicationSpec::BF16);
    EXPECT_TRUE(CheckSpecRules(compressed).ok()) << CheckSpecRules(compressed);
  }
}

TEST(SpecRulesTest, RefusesBadModelGraphsNamingTheField) {
  v1::JobSpec unknown = SmallCsvJob();
  unknown.mutable_model()->mutable_layers(0)->add_inputs("x");
  EXPECT_THAT(Refusal(unknown),
              StartsWith("model.layers[0].inputs[0]: no layer or model input named 'x'"));
  v1::JobSpec named = SmallCsvJob();
  named.mutable_model()->clear_input_shape();
  v1::ModelInput* in = named.mutable_model()->add_inputs();
  in->set_name("features");
  in->add_shape(8);
  EXPECT_THAT(Refusal(named), StartsWith("model.inputs: a job's data feeds one input"));
}

TEST(SpecRulesTest, PrecisionIsAKnownModeForF32ModelsNamingTheField) {
  for (const char* mode : {"F32", "BF16_MIXED", "TF32"}) {
    v1::ModelSpec precision;  // the field as users write it, JSON
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        absl::StrCat(R"({"precision": ")", mode, R"("})"), &precision);
    ASSERT_TRUE(parsed.ok()) << parsed;
    v1::JobSpec spec = SmallCsvJob();
    spec.mutable_model()->MergeFrom(precision);
    EXPECT_TRUE(CheckSpecRules(spec).ok()) << mode << ": " << CheckSpecRules(spec);
  }
  v1::JobSpec f64 = SmallCsvJob();
  f64.mutable_model()->set_f64(true);
  EXPECT_TRUE(CheckSpecRules(f64).ok()) << CheckSpecRules(f64);  // unspecified: f64's own
  f64.mutable_model()->set_precision(v1::Precision::BF16_MIXED);
  EXPECT_EQ(Refusal(f64),
            "model.precision: BF16_MIXED is for f32 models, but model.f64 is true; drop one of "
            "them");
  f64.mutable_model()->set_precision(v1::Precision::TF32);  // TF32 rounds f32 operands
  EXPECT_EQ(Refusal(f64),
            "model.precision: TF32 is for f32 models, but model.f64 is true; drop one of them");
  f64.mutable_model()->set_precision(v1::Precision::F32);
  EXPECT_THAT(Refusal(f64), StartsWith("model.precision: F32 is for f32 models"));
  v1::JobSpec unknown = SmallCsvJob();
  unknown.mutable_model()->set_precision(static_cast<v1::Precision::Mode>(7));
  EXPECT_EQ(Refusal(unknown), "model.precision: 7 is not a precision; use F32, TF32 or BF16_MIXED");
}

TEST(SpecRulesTest, RefusesARestartPolicyThatCannotRestoreNamingTheField) {
  v1::JobSpec negative = SmallCsvJob();
  negative.mutable_restart_policy()->set_max_restarts(-1);
  EXPECT_THAT(Refusal(negative), StartsWith("restart_policy.max_restarts: -1 must be >= 0"));

  // Restarts without periodic checkpoints would redo every step: refused, saying so.
  v1::JobSpec no_checkpoints = SmallCsvJob();
  no_checkpoints.mutable_restart_policy()->set_max_restarts(2);
  no_checkpoints.mutable_checkpoint()->set_every_steps(0);
  EXPECT_THAT(Refusal(no_checkpoints), StartsWith("checkpoint.every_steps: 0"));
  EXPECT_THAT(Refusal(no_checkpoints), HasSubstr("redo all the steps"));

  v1::JobSpec copies = SmallCsvJob();
  copies.mutable_checkpoint()->set_copies(-2);
  EXPECT_THAT(Refusal(copies), StartsWith("checkpoint.copies: -2 must be >= 0"));

  v1::JobSpec elastic = SmallCsvJob();
  elastic.set_strategy(v1::MULTI_WORKER_MIRRORED);
  elastic.mutable_checkpoint()->set_every_steps(50);
  elastic.mutable_restart_policy()->set_max_restarts(2);
  elastic.mutable_restart_policy()->set_min_workers(3);
  elastic.mutable_restart_policy()->set_max_workers(2);
  EXPECT_THAT(Refusal(elastic), StartsWith("restart_policy.min_workers: 3 is above "
                                           "restart_policy.max_workers 2"));
  elastic.mutable_restart_policy()->set_max_workers(4);
  elastic.mutable_restart_policy()->set_max_restarts(0);
  EXPECT_THAT(Refusal(elastic), HasSubstr("losing a worker is a restart"));
  elastic.mutable_restart_policy()->set_max_restarts(2);
  elastic.mutable_restart_policy()->set_replacement_timeout_ms(-1);
  EXPECT_THAT(Refusal(elastic), StartsWith("restart_policy.replacement_timeout_ms: -1"));
  elastic.mutable_restart_policy()->set_replacement_timeout_ms(5000);
  EXPECT_TRUE(CheckSpecRules(elastic).ok()) << CheckSpecRules(elastic);
  elastic.set_strategy(v1::MIRRORED);
  EXPECT_THAT(Refusal(elastic), HasSubstr("elastic worker counts need MULTI_WORKER_MIRRORED"));

  v1::JobSpec ok = SmallCsvJob();
  ok.mutable_restart_policy()->set_max_restarts(2);
  ok.mutable_checkpoint()->set_every_steps(50);
  EXPECT_TRUE(CheckSpecRules(ok).ok()) << CheckSpecRules(ok);
}

TEST(SpecRulesTest, TfRecordDataNeedsAFeatureSpecThatFillsTheModelInput) {
  EXPECT_TRUE(CheckSpecRules(TfRecordJob()).ok()) << CheckSpecRules(TfRecordJob());
  v1::JobSpec float_label = TfRecordJob();
  float_label.mutable_data()->mutable_train()->mutable_tfrecord()->mutable_label()->add_shape(1);
  float_label.mutable_data()->mutable_train()->mutable_tfrecord()->mutable_label()->set_dtype(
      v1::TfRecordFeature::FLOAT);
  EXPECT_TRUE(CheckSpecRules(float_label).ok()) << CheckSpecRules(float_label);

  // Each bad spec is refused naming the field to fix.
  const std::pair<std::function<void(v1::TfRecordSpec*)>, std::string> cases[] = {
      {[](v1::TfRecordSpec* t) { t->Clear(); },
       "data.train.tfrecord.features: at least one input feature is needed"},
      {[](v1::TfRecordSpec* t) { t->mutable_features(1)->clear_name(); },
       "data.train.tfrecord.features[1].name: missing"},
      {[](v1::TfRecordSpec* t) { t->mutable_features(1)->set_name("pixels"); },
       "data.train.tfrecord.features[1].name: 'pixels' is also features[0]"},
      {[](v1::TfRecordSpec* t) { t->mutable_features(0)->set_shape(1, 0); },
       "data.train.tfrecord.features[0].shape[1]: 0 must be > 0"},
      {[](v1::TfRecordSpec* t) { t->mutable_features(0)->clear_dtype(); },
       "data.train.tfrecord.features[0].dtype: missing: FLOAT"},
      {[](v1::TfRecordSpec* t) { t->mutable_features(0)->set_shape(1, 4); },
       "data.train.tfrecord.features: the features hold 10 values per example, but "
       "model.input_shape [8] takes 8"},
      {[](v1::TfRecordSpec* t) { t->clear_label(); }, "data.train.tfrecord.label: missing"},
      {[](v1::TfRecordSpec* t) { t->mutable_label()->clear_name(); },
       "data.train.tfrecord.label.name: missing"},
      {[](v1::TfRecordSpec* t) { t->mutable_label()->add_shape(2); },
       "data.train.tfrecord.label.shape: the label holds 2 values per example, but the model "
       "takes labels [?] (1 per example"},
      {[](v1::TfRecordSpec* t) { t->mutable_label()->clear_dtype(); },
       "data.train.tfrecord.label.dtype: missing"},
  };
  for (const auto& [mutate, refusal] : cases) {
    v1::JobSpec bad = TfRecordJob();
    mutate(bad.mutable_data()->mutable_train()->mutable_tfrecord());
    EXPECT_THAT(Refusal(bad), StartsWith(refusal));
  }
  v1::JobSpec no_spec = TfRecordJob();
  no_spec.mutable_data()->mutable_train()->clear_tfrecord();
  EXPECT_THAT(Refusal(no_spec), StartsWith("data.train.tfrecord: missing"));
  v1::JobSpec csv_with_spec = TfRecordJob();
  csv_with_spec.mutable_data()->mutable_train()->set_format(v1::DataSource::CSV);
  EXPECT_THAT(Refusal(csv_with_spec), StartsWith("data.train.tfrecord: only for format TFRECORD"));
  v1::JobSpec eval = TfRecordJob();
  eval.set_epochs(0);
  eval.set_steps(10);
  *eval.mutable_data()->mutable_eval() = eval.data().train();
  eval.mutable_data()->mutable_eval()->mutable_tfrecord()->mutable_features(0)->clear_name();
  EXPECT_THAT(Refusal(eval), StartsWith("data.eval.tfrecord.features[0].name: missing"));
}

TEST(SpecRulesTest, RefusesABadOptimizerNamingTheField) {
  v1::JobSpec empty = SmallCsvJob();
  empty.mutable_optimizer()->Clear();  // "optimizer": {}
  EXPECT_THAT(Refusal(empty), StartsWith("optimizer.kind: set one of sgd, momentum, adam"));

  v1::JobSpec beta1 = SmallCsvJob();
  beta1.mutable_optimizer()->mutable_adam()->set_beta1(2);
  EXPECT_THAT(Refusal(beta1), StartsWith("optimizer.adam.beta1: "));

  v1::JobSpec momentum = SmallCsvJob();
  momentum.mutable_optimizer()->mutable_momentum()->set_momentum(1.5);
  EXPECT_THAT(Refusal(momentum), StartsWith("optimizer.momentum.momentum: "));

  v1::JobSpec no_schedule = SmallCsvJob();
  no_schedule.mutable_optimizer()->clear_learning_rate();
  EXPECT_THAT(Refusal(no_schedule), StartsWith("optimizer.learning_rate.schedule: "));

  v1::JobSpec decay = SmallCsvJob();
  decay.mutable_optimizer()->mutable_learning_rate()->mutable_step_decay()->set_initial(0.1);
  decay.mutable_optimizer()->mutable_learning_rate()->mutable_step_decay()->set_decay_rate(0.5);
  EXPECT_THAT(Refusal(decay), StartsWith("optimizer.learning_rate.step_decay.decay_steps: "));

  v1::JobSpec adam = SmallCsvJob();  // defaults filled in: valid
  adam.mutable_optimizer()->mutable_adam();
  EXPECT_TRUE(CheckSpecRules(adam).ok()) << CheckSpecRules(adam);
}

TEST(SpecRulesTest, RefusesPathsThatClimbOutNamingTheField) {
  v1::JobSpec up = SmallCsvJob();
  up.mutable_data()->mutable_train()->add_files("data/../../etc/passwd");
  EXPECT_THAT(Refusal(up), StartsWith("data.train.files[1]: 'data/../../etc/passwd' has a '..'"));
  v1::JobSpec ckpt = SmallCsvJob();
  ckpt.mutable_checkpoint()->set_dir("/var/lib/lockstepd/output/../../../root");
  EXPECT_THAT(Refusal(ckpt), StartsWith("checkpoint.dir: "));
  v1::JobSpec tb = SmallCsvJob();
  tb.mutable_summaries()->set_dir("..");
  EXPECT_THAT(Refusal(tb), StartsWith("summaries.dir: "));
  v1::JobSpec nul = SmallCsvJob();
  nul.mutable_data()->mutable_train()->set_files(0, std::string("a\0b", 3));
  EXPECT_THAT(Refusal(nul), StartsWith("data.train.files[0]: the path holds a NUL byte"));
  // Relative paths and names that merely contain dots are fine (the worker resolves them).
  v1::JobSpec fine = SmallCsvJob();
  fine.mutable_data()->mutable_train()->set_files(0, "digits..v2/train.csv");
  fine.mutable_checkpoint()->set_dir("runs/a/ckpt");
  EXPECT_TRUE(CheckSpecRules(fine).ok()) << CheckSpecRules(fine);
}

TEST(SpecRulesTest, RefusesModelsAndBatchesOverTheLimitsNamingTheFlag) {
  const JobLimits limits;             // the defaults
  v1::JobSpec small = SmallCsvJob();  // 8*4 + 4 parameters
  EXPECT_TRUE(CheckModelSize(small, limits, 1).ok());
  EXPECT_TRUE(CheckModelSize(small, JobLimits{.max_model_parameters = 36}, 1).ok());
  absl::Status params = CheckModelSize(small, JobLimits{.max_model_parameters = 35}, 1);
  EXPECT_EQ(params.code(), absl::StatusCode::kResourceExhausted) << params;
  EXPECT_THAT(params.message(), HasSubstr("model: parameters 36"));
  EXPECT_THAT(params.message(), HasSubstr("--max_model_parameters"));

  // 36 f32 parameters, their gradients and Adam's two slots: 576 bytes.
  v1::JobSpec adam = SmallCsvJob();
  adam.mutable_optimizer()->mutable_adam();
  EXPECT_TRUE(CheckModelSize(adam, JobLimits{.max_model_bytes = 576}, 1).ok());
  absl::Status bytes = CheckModelSize(adam, JobLimits{.max_model_bytes = 575}, 1);
  EXPECT_EQ(bytes.code(), absl::StatusCode::kResourceExhausted) << bytes;
  EXPECT_THAT(bytes.message(), HasSubstr("--max_model_bytes"));

  // Two layers of 2^16 units: 2^32 parameters in the second, over the default.
  v1::JobSpec huge = SmallCsvJob();
  huge.mutable_model()->mutable_layers(0)->mutable_dense()->set_units(int64_t{1} << 16);
  huge.mutable_model()->add_layers()->mutable_dense()->set_units(int64_t{1} << 16);
  ASSERT_TRUE(CheckSpecRules(huge).ok()) << CheckSpecRules(huge);
  EXPECT_THAT(CheckModelSize(huge, limits, 1).message(), HasSubstr("--max_model_parameters"));

  // The global batch: one replica would hold it all, eight hold an eighth each.
  v1::JobSpec batch = SmallCsvJob();
  batch.set_global_batch_size(int64_t{1} << 30);
  absl::Status one = CheckModelSize(batch, JobLimits{.max_batch_bytes = int64_t{64} << 30}, 1);
  EXPECT_EQ(one.code(), absl::StatusCode::kResourceExhausted) << one;
  EXPECT_THAT(one.message(), HasSubstr("global_batch_size: "));
  EXPECT_THAT(one.message(), HasSubstr("--max_batch_bytes"));
  EXPECT_TRUE(CheckModelSize(batch, JobLimits{.max_batch_bytes = int64_t{64} << 30}, 1024).ok());
}

}  // namespace
}  // namespace jobspec
}  // namespace lockstep

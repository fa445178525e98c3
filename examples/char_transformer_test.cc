// The character-level Transformer language model of examples/jobs/char_transformer.json
// (2 causal self-attention blocks over the fortunes corpus, examples/data/README.md),
// trained on one replica in this process with the job's model, optimizer, batch and steps:
// its validation loss per character falls below the figure the README states. The job file
// goes through the lowering the coordinator runs at submit (jobspec/lower.h) first, and the
// test trains what the plan says (its training source, its evaluation source), so that what
// trains here is what `lockstep submit` and `lockstep local` accept and run.
#include <fstream>
#include <iostream>
#include <sstream>

#include "data/example_reader.h"
#include "data/split.h"
#include "examples/local_trainer.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "jobspec/lower.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep::examples {
namespace {

v1::JobSpec ReadJob(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  v1::JobSpec spec;
  const auto parsed = google::protobuf::util::JsonStringToMessage(s.str(), &spec);
  EXPECT_TRUE(parsed.ok()) << path << ": " << parsed;
  return spec;
}

// Windows of 64 token ids ("tokens") and the 64 that follow each ("next").
absl::StatusOr<data::Element> ReadWindows(const std::string& file) {
  using Kind = data::ExampleFeature::Kind;
  data::ExampleOptions o;
  o.features = {{"tokens", engine::Shape{64}, Kind::kInt64}};
  o.label = {"next", engine::Shape{64}, Kind::kInt64};
  return data::ReadAll(data::Dataset::TfRecord({file}, o));
}

// With an eval source the workers stream the training files and cannot know an epoch's
// size: the lowering takes `steps` only, and so does this test.
TEST(CharTransformer, JobFileLowersAsTheCoordinatorLowersASubmission) {
  v1::JobSpec job = ReadJob("examples/jobs/char_transformer.json");
  for (const int replicas : {1, 2, 4}) {
    const absl::StatusOr<v1::JobPlan> plan =
        jobspec::LowerJobSpec(job, jobspec::ClusterFacts::OneWorker(replicas));
    EXPECT_TRUE(plan.ok()) << replicas << " replicas: " << plan.status();
  }
  job.set_epochs(6);
  job.set_steps(0);
  const absl::Status epochs =
      jobspec::LowerJobSpec(job, jobspec::ClusterFacts::OneWorker(1)).status();
  EXPECT_EQ(epochs.code(), absl::StatusCode::kInvalidArgument) << epochs;
  EXPECT_THAT(std::string(epochs.message()), ::testing::StartsWith("epochs: ")) << epochs;
  EXPECT_THAT(std::string(epochs.message()), ::testing::HasSubstr("give steps instead")) << epochs;
}

TEST(CharTransformer, ValidationLossFallsBelow2Point05) {
  const v1::JobSpec job = ReadJob("examples/jobs/char_transformer.json");
  const absl::StatusOr<v1::JobPlan> plan =
      jobspec::LowerJobSpec(job, jobspec::ClusterFacts::OneWorker(1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(job.steps(), 0);
  // What the plan decided: one CPU replica, evaluation on the job's eval source.
  ASSERT_EQ(plan->devices().kind(), v1::DevicePlan::CPU);
  ASSERT_EQ(plan->input().eval(), v1::InputPlan::SOURCE);
  ASSERT_EQ(job.data().train().files_size(), 1);
  ASSERT_EQ(job.data().eval().files_size(), 1);
  auto train = ReadWindows(job.data().train().files(0));
  auto valid = ReadWindows(job.data().eval().files(0));
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_EQ(train->labels.shape(), (engine::Shape{5148, 64}));
  auto trainer = LocalTrainer::Create(job.model(), job.optimizer());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto before = (*trainer)->Loss(*valid);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::Status trained = (*trainer)->TrainSteps(
      *train, job.steps(), job.global_batch_size(), [&](const EpochStats& s) {
        auto loss = (*trainer)->Loss(*valid);
        std::cerr << "epoch " << s.epoch << ": train loss " << s.mean_loss << ", validation loss "
                  << (loss.ok() ? *loss : -1) << "\n";
      });
  ASSERT_TRUE(trained.ok()) << trained;
  auto after = (*trainer)->Loss(*valid);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(*before, 4.0);  // about ln(96) = 4.56 at the start
  EXPECT_LT(*after,
            2.05);  // measured: see the README (960 steps, about 6 epochs, 40 s on one core)
  RecordProperty("validation_loss", std::to_string(*after));
}

}  // namespace
}  // namespace lockstep::examples

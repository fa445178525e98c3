// The character-level Transformer language model of examples/jobs/char_transformer.json
// (2 causal self-attention blocks over the fortunes corpus, examples/data/README.md),
// trained on one replica in this process with the job's model, optimizer, batch and epochs:
// its validation loss per character falls below the figure the README states.
#include <fstream>
#include <iostream>
#include <sstream>

#include "data/example_reader.h"
#include "data/split.h"
#include "examples/local_trainer.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
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

TEST(CharTransformer, ValidationLossFallsBelow2Point05) {
  const v1::JobSpec job = ReadJob("examples/jobs/char_transformer.json");
  auto train = ReadWindows("examples/data/fortunes-train.tfrecord");
  auto valid = ReadWindows("examples/data/fortunes-valid.tfrecord");
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_EQ(train->labels.shape(), (engine::Shape{5148, 64}));
  auto trainer = LocalTrainer::Create(job.model(), job.optimizer());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto before = (*trainer)->Loss(*valid);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::Status trained =
      (*trainer)->Train(*train, job.epochs(), job.global_batch_size(), [&](const EpochStats& s) {
        auto loss = (*trainer)->Loss(*valid);
        std::cerr << "epoch " << s.epoch << ": train loss " << s.mean_loss << ", validation loss "
                  << (loss.ok() ? *loss : -1) << "\n";
      });
  ASSERT_TRUE(trained.ok()) << trained;
  auto after = (*trainer)->Loss(*valid);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(*before, 4.0);  // about ln(96) = 4.56 at the start
  EXPECT_LT(*after, 2.05);  // 1.968 measured (6 epochs, about 40 s on one core)
  RecordProperty("validation_loss", std::to_string(*after));
}

}  // namespace
}  // namespace lockstep::examples

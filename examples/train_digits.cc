// Trains a model on the bundled digits in this process and prints the loss per epoch and
// the final test accuracy:
//   bazel run //examples:train_digits
//   bazel run //examples:train_digits -- --model=examples/digits_cnn.json --epochs=20
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/process.h"
#include "engine/model_builder.h"
#include "examples/digits_data.h"
#include "examples/local_trainer.h"

ABSL_FLAG(std::string, model, "examples/digits_mlp.json", "ModelSpec JSON file");
ABSL_FLAG(std::string, optimizer, "examples/digits_optimizer.json", "OptimizerSpec JSON file");
ABSL_FLAG(std::string, data, lockstep::examples::kDigitsPath, "digits CSV (plain or .gz)");
ABSL_FLAG(int, epochs, 20, "passes over the training data");
ABSL_FLAG(int, batch_size, 32, "examples per step");

namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError("cannot read " + path +
                               " (run from the workspace root, or through bazel run)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "train_digits: %s\n", std::string(status.ToString()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::InitProcess();
  absl::ParseCommandLine(argc, argv);
  using namespace lockstep;
  auto model_json = ReadText(absl::GetFlag(FLAGS_model));
  if (!model_json.ok()) return Fail(model_json.status());
  auto optimizer_json = ReadText(absl::GetFlag(FLAGS_optimizer));
  if (!optimizer_json.ok()) return Fail(optimizer_json.status());
  auto model = engine::ParseModelSpecJson(*model_json);
  if (!model.ok()) return Fail(model.status());
  auto optimizer = engine::ParseOptimizerSpecJson(*optimizer_json);
  if (!optimizer.ok()) return Fail(optimizer.status());
  auto data = examples::LoadDigits(absl::GetFlag(FLAGS_data));
  if (!data.ok()) return Fail(data.status());
  auto trainer = examples::LocalTrainer::Create(*model, *optimizer);
  if (!trainer.ok()) return Fail(trainer.status());

  std::printf("digits: %lld train, %lld test examples; model %s\n",
              static_cast<long long>(data->first.labels.shape().dim(0)),
              static_cast<long long>(data->second.labels.shape().dim(0)),
              absl::GetFlag(FLAGS_model).c_str());
  const absl::Time start = absl::Now();
  absl::Status trained =
      (*trainer)->Train(data->first, absl::GetFlag(FLAGS_epochs), absl::GetFlag(FLAGS_batch_size),
                        [](const examples::EpochStats& s) {
                          std::printf("epoch %3d  loss %.4f  train accuracy %.4f\n", s.epoch + 1,
                                      s.mean_loss, s.train_accuracy);
                        });
  if (!trained.ok()) return Fail(trained);
  auto accuracy = (*trainer)->Accuracy(data->second);
  if (!accuracy.ok()) return Fail(accuracy.status());
  std::printf("test accuracy %.4f (%.2f s)\n", *accuracy,
              absl::ToDoubleSeconds(absl::Now() - start));
  return 0;
}

#include "client/cli/export_command.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "export/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace cli {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::Checkpoint Sample(int64_t step) {
  v1::Checkpoint c;
  c.set_job_id("digits");
  c.set_global_step(step);
  for (const char* name : {"dense/kernel", "dense/bias"}) {
    v1::NamedTensor* v = c.add_variables();
    v->set_name(name);
    v->mutable_tensor()->set_dtype(v1::F32);
    v->mutable_tensor()->mutable_shape()->add_dims(2);
    const float values[2] = {0.25f * step, -1.5f};
    v->mutable_tensor()->set_content(std::string(reinterpret_cast<const char*>(values), 8));
  }
  v1::NamedTensor* slot = c.add_optimizer_slots();
  *slot = c.variables(0);
  slot->set_name("dense/kernel/m");
  return c;
}

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

Outcome Export(const std::vector<std::string>& argv) {
  const Command c = ExportCommand();
  auto args = CommandArgs::Parse(argv, c.options);
  EXPECT_TRUE(args.ok()) << args.status();
  std::ostringstream out, err;
  CommandContext ctx;
  ctx.out = &out;
  ctx.err = &err;
  Outcome r;
  r.code = c.run(*args, ctx);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(ExportCommand, ADirectorysNewestCheckpointBecomesSafetensors) {
  const std::string dir = TempDir("ckpt");
  for (int64_t step : {10, 20}) {
    std::ofstream(dir + "/" + checkpoint::CheckpointManager::FileName(step), std::ios::binary)
        << checkpoint::CheckpointManager::Encode(Sample(step)).value();
  }
  const std::string output = TempDir("out") + "/model.safetensors";
  Outcome r = Export({dir, "--format=safetensors", "--output=" + output, "--with_optimizer_state"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("step 20) as safetensors: " + output));
  auto back = exporting::ReadSafetensorsFile(output);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tensors.size(), 3u);
  EXPECT_EQ(back->tensors[0].name(), "dense/kernel");
  EXPECT_EQ(back->tensors[0].tensor().content(), Sample(20).variables(0).tensor().content());
  EXPECT_EQ(back->tensors[2].name(), "dense/kernel/m");
  EXPECT_EQ(back->metadata.at("step"), "20");
  EXPECT_FALSE(std::filesystem::exists(output + ".tmp"));
}

TEST(ExportCommand, AFileBecomesNpzWithTheVariablesOnly) {
  const std::string path = TempDir("file") + "/" + checkpoint::CheckpointManager::FileName(5);
  std::ofstream(path, std::ios::binary) << checkpoint::CheckpointManager::Encode(Sample(5)).value();
  const std::string output = TempDir("file") + "/model.npz";
  Outcome r = Export({path, "--format", "npz", "--output", output});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const std::string zip = Slurp(output);
  EXPECT_EQ(zip.substr(0, 4), "PK\x03\x04");
  EXPECT_NE(zip.find("dense/bias.npy"), std::string::npos);
  EXPECT_EQ(zip.find("dense/kernel/m.npy"), std::string::npos);
}

TEST(ExportCommand, BadRequestsAreRefusedNamingWhatIsWrong) {
  const std::string dir = TempDir("bad");
  std::ofstream(dir + "/" + checkpoint::CheckpointManager::FileName(1), std::ios::binary)
      << checkpoint::CheckpointManager::Encode(Sample(1)).value();
  Outcome unknown = Export({dir, "--format=pickle", "--output=" + dir + "/m"});
  EXPECT_EQ(unknown.code, kExitUsage);
  EXPECT_THAT(
      unknown.err,
      HasSubstr("--format: unknown format \"pickle\"; expected one of npz, onnx, safetensors"));
  EXPECT_THAT(Export({dir, "--format=onnx", "--output=" + dir + "/m"}).err,
              HasSubstr("--spec: ONNX export needs the job's spec"));
  EXPECT_THAT(Export({dir, "--output=" + dir + "/m"}).err, HasSubstr("--format is needed"));
  EXPECT_THAT(Export({dir, "--format=npz"}).err, HasSubstr("--output is needed"));

  // Not a path here: a job id, fetched through the coordinator (none listens on port 1).
  Outcome job = Export({"job-000007", "--format=npz", "--output=" + dir + "/m", "--insecure",
                        "--coordinator=127.0.0.1:1"});
  EXPECT_EQ(job.code, kExitFailure);
  EXPECT_THAT(job.err, HasSubstr("exporting job job-000007's newest checkpoint, fetched through "
                                 "the coordinator 127.0.0.1:1"));
  EXPECT_THAT(job.err, HasSubstr("GetJob to coordinator 127.0.0.1:1"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/m.lsckpt.part"));
  EXPECT_THAT(Export({"job-000007", "--format=npz", "--output=" + dir + "/m", "--step=x"}).err,
              HasSubstr("--step: expected a step"));

  const std::string empty = TempDir("empty");
  Outcome none = Export({empty, "--format=npz", "--output=" + dir + "/m"});
  EXPECT_EQ(none.code, kExitFailure);
  EXPECT_FALSE(std::filesystem::exists(dir + "/m"));

  const std::string corrupt = dir + "/corrupt.lsckpt";
  std::ofstream(corrupt, std::ios::binary) << "LSCK and nothing else";
  Outcome bad = Export({corrupt, "--format=npz", "--output=" + dir + "/m"});
  EXPECT_EQ(bad.code, kExitFailure);
  EXPECT_THAT(bad.err, HasSubstr(corrupt));
}

}  // namespace
}  // namespace cli
}  // namespace lockstep

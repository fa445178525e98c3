#include "worker/checkpoint_upload.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

constexpr char kUid[] = "job-000004@99";

std::string TestDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/", name);
}

// Saves a checkpoint of kUid at `step` into `dir`; returns its path.
std::string Save(const std::string& dir, int64_t step, const std::string& uid = kUid) {
  auto manager =
      checkpoint::CheckpointManager::Create({.dir = dir, .keep_last = 10, .job_uid = uid});
  EXPECT_TRUE(manager.ok()) << manager.status();
  v1::Checkpoint c;
  c.set_job_id("job-000004");
  c.set_job_uid(uid);
  c.set_global_step(step);
  v1::NamedTensor* t = c.add_variables();
  t->set_name("w");
  t->mutable_tensor()->set_dtype(v1::F32);
  t->mutable_tensor()->mutable_shape()->add_dims(1000);
  t->mutable_tensor()->set_content(std::string(4000, static_cast<char>(step)));
  absl::StatusOr<std::string> path = (*manager)->Save(c);
  EXPECT_TRUE(path.ok()) << path.status();
  return *path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(FindCheckpointToUploadTest, TheNewestWholeFileAcrossTheDirectories) {
  const std::string copies = TestDir("find/state/checkpoints/" + std::string(kUid));
  const std::string chief = TestDir("find/ckpt");
  Save(copies, 10);
  const std::string newest = Save(chief, 20);
  Save(chief, 5, "job-000001@1");  // another job's, newer than nothing of ours
  absl::StatusOr<CheckpointFile> file = FindCheckpointToUpload({copies, chief}, kUid, 0, 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->path, newest);
  EXPECT_EQ(file->step, 20);
  EXPECT_EQ(file->bytes, static_cast<int64_t>(ReadAll(newest).size()));

  file = FindCheckpointToUpload({copies, chief}, kUid, 10, 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->step, 10);
}

TEST(FindCheckpointToUploadTest, SkipsCorruptAndOversizeFilesSayingWhy) {
  const std::string dir = TestDir("skip/ckpt");
  const std::string older = Save(dir, 10);
  const std::string corrupt = Save(dir, 20);
  auto flip = [](const std::string& path) {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  };
  flip(corrupt);
  absl::StatusOr<CheckpointFile> file = FindCheckpointToUpload({dir}, kUid, 0, 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->step, 10) << "the corrupt newest one is skipped";

  file = FindCheckpointToUpload({dir}, kUid, 0, 100);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(file.status().message(), "over the job's bound of 100"))
      << file.status();

  flip(older);
  file = FindCheckpointToUpload({dir}, kUid, 0, 1 << 20);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(file.status().message(), "payload CRC mismatch")) << file.status();

  file = FindCheckpointToUpload({TestDir("skip/none")}, kUid, 0, 1 << 20);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(file.status().message(), "no checkpoint of job-000004@99 in"))
      << file.status();
}

// Records every message of every call.
struct Calls {
  absl::Mutex mu;
  std::vector<std::vector<v1::CheckpointUploadChunk>> calls;
};

class RecordingStream final : public UploadStream {
 public:
  explicit RecordingStream(Calls* calls) : calls_(calls) {}
  bool Write(const v1::CheckpointUploadChunk& m) override {
    messages_.push_back(m);
    return true;
  }
  absl::Status Finish() override {
    absl::MutexLock l(&calls_->mu);
    calls_->calls.push_back(messages_);
    return absl::OkStatus();
  }

 private:
  Calls* calls_;
  std::vector<v1::CheckpointUploadChunk> messages_;
};

class RecordingHandler final : public AssignmentHandler {
 public:
  void Handle(const v1::Assignment& a) override { handled.push_back(a); }
  void DropAll(const std::string&) override {}
  std::vector<v1::JobReport> Reports() override { return {}; }
  std::vector<v1::Assignment> handled;
};

v1::Assignment Directive(const std::string& checkpoint_dir) {
  v1::Assignment a;
  v1::UploadCheckpoint* u = a.mutable_upload_checkpoint();
  u->set_fetch_id("f1");
  u->mutable_task()->set_type("worker");
  u->set_job_id("job-000004");
  u->set_job_uid(kUid);
  u->set_checkpoint_dir(checkpoint_dir);
  u->set_max_bytes(1 << 20);
  return a;
}

TEST(CheckpointUploaderTest, SendsTheFileInChunksAndHandsJobsOn) {
  const std::string dir = TestDir("upload/ckpt");
  const std::string path = Save(dir, 30);
  Calls calls;
  RecordingHandler jobs;
  {
    CheckpointUploader uploader(
        &jobs, [&calls](absl::Time) { return std::make_unique<RecordingStream>(&calls); },
        {.state_dir = TestDir("upload/state"), .chunk_bytes = 1000});
    uploader.Handle(Directive(dir));
    v1::Assignment run;
    run.mutable_run()->set_job_id("job-000005");
    uploader.Handle(run);
  }  // joins the upload
  ASSERT_EQ(jobs.handled.size(), 1u);
  EXPECT_EQ(jobs.handled[0].run().job_id(), "job-000005");
  ASSERT_EQ(calls.calls.size(), 1u);
  const std::vector<v1::CheckpointUploadChunk>& m = calls.calls[0];
  ASSERT_GE(m.size(), 3u);
  EXPECT_EQ(m[0].fetch_id(), "f1");
  EXPECT_EQ(m[0].step(), 30);
  EXPECT_EQ(m[0].file(), path);
  std::string bytes;
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_LE(m[i].data().size(), 1000u);
    EXPECT_EQ(m[i].last(), i + 1 == m.size());
    bytes += m[i].data();
  }
  EXPECT_EQ(bytes, ReadAll(path));
  EXPECT_EQ(m[0].total_bytes(), static_cast<int64_t>(bytes.size()));
}

TEST(CheckpointUploaderTest, AWorkerWithoutTheCheckpointSaysWhyInItsOnlyMessage) {
  Calls calls;
  RecordingHandler jobs;
  CheckpointUploader uploader(
      &jobs, [&calls](absl::Time) { return std::make_unique<RecordingStream>(&calls); },
      {.state_dir = TestDir("none/state")});
  ASSERT_TRUE(uploader.Upload(Directive(TestDir("none/ckpt")).upload_checkpoint()).ok());
  ASSERT_EQ(calls.calls.size(), 1u);
  ASSERT_EQ(calls.calls[0].size(), 1u);
  EXPECT_EQ(calls.calls[0][0].error_code(), static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_TRUE(absl::StrContains(calls.calls[0][0].error_message(), kUid));
}

TEST(CheckpointUploaderTest, TheCheckpointDirIsResolvedUnderTheOutputRootAsJobsDo) {
  const std::string root = TestDir("roots/out");
  Save(root + "/rel/ckpt", 12);
  const std::string outside = TestDir("roots/elsewhere");
  Save(outside, 50);
  absl::StatusOr<FileRoots> roots = FileRoots::Create({TestDir("roots/data")}, {root});
  ASSERT_TRUE(roots.ok()) << roots.status();
  Calls calls;
  RecordingHandler jobs;
  CheckpointUploader uploader(
      &jobs, [&calls](absl::Time) { return std::make_unique<RecordingStream>(&calls); },
      {.state_dir = TestDir("roots/state"),
       .file_roots = std::make_shared<const FileRoots>(*std::move(roots))});
  ASSERT_TRUE(uploader.Upload(Directive("rel/ckpt").upload_checkpoint()).ok());
  ASSERT_TRUE(uploader.Upload(Directive(outside).upload_checkpoint()).ok());
  ASSERT_EQ(calls.calls.size(), 2u);
  EXPECT_EQ(calls.calls[0][0].step(), 12);
  EXPECT_EQ(calls.calls[0][0].error_code(), 0);
  EXPECT_EQ(calls.calls[1][0].error_code(), static_cast<int>(absl::StatusCode::kNotFound))
      << "a directory outside --output_root is not read";
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

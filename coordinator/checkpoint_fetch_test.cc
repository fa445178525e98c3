// CheckpointFetch against a fake cluster whose "workers" are threads answering the
// directives it sends through FakeUploader (the worker's side of UploadCheckpoint, message by
// message), so every path is exercised without gRPC or a trained job.
#include "coordinator/checkpoint_fetch.h"

#include <atomic>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_bound.h"
#include "engine/model_builder.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

constexpr char kJob[] = "job-000007";
constexpr int64_t kCreated = 1732000000000000;
constexpr char kUid[] = "job-000007@1732000000000000";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The bytes of a checkpoint of `uid` at `step`, about `bytes` long.
std::string Checkpoint(const std::string& uid, int64_t step, size_t bytes = 300000) {
  v1::Checkpoint c;
  c.set_job_id(kJob);
  c.set_job_uid(uid);
  c.set_global_step(step);
  v1::NamedTensor* t = c.add_variables();
  t->set_name("dense/kernel");
  t->mutable_tensor()->set_dtype(v1::F32);
  t->mutable_tensor()->mutable_shape()->add_dims(static_cast<int64_t>(bytes / 4));
  std::string content(bytes / 4 * 4, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 31 + 7);
  t->mutable_tensor()->set_content(content);
  absl::StatusOr<std::string> encoded = checkpoint::CheckpointManager::Encode(c);
  EXPECT_TRUE(encoded.ok()) << encoded.status();
  return *encoded;
}

// How a fake worker answers a directive.
using Answer = std::function<void(const v1::UploadCheckpoint&, CheckpointFetch&)>;

class FakeCluster final : public FetchCluster {
 public:
  FakeCluster() {
    v1::GetJobResponse job;
    job.mutable_job()->set_id(kJob);
    job.mutable_job()->set_state(v1::SUCCEEDED);
    job.mutable_job()->set_attempt(1);
    job.mutable_job()->set_created_unix_micros(kCreated);
    for (int i = 0; i < 2; ++i) {
      v1::AttemptWorkerRecord* w = job.mutable_job()->add_attempt_workers();
      w->set_task_type("worker");
      w->set_task_index(i);
    }
    auto model = engine::ParseModelSpecJson(ReadText("examples/digits_mlp.json"));
    EXPECT_TRUE(model.ok()) << model.status();
    *job.mutable_spec()->mutable_model() = *model;
    job.mutable_spec()->mutable_checkpoint()->set_dir("/ckpt");
    job_ = job;
  }
  ~FakeCluster() override { Join(); }
  // Waits for every fake worker's thread.
  void Join() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock l(&mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  absl::StatusOr<v1::GetJobResponse> Job(const std::string& id) override {
    if (id != kJob) return absl::NotFoundError("job " + id + " not found");
    return job_;
  }
  absl::Status Send(const TaskRef& task, v1::Assignment directive) override {
    absl::MutexLock l(&mu_);
    asked_.push_back(task.ToString());
    if (connected_.count(task.index) == 0) {
      return absl::UnavailableError(task.ToString() + " is LOST, not connected");
    }
    auto it = answers_.find(task.index);
    if (it != answers_.end() && fetch_ != nullptr) {
      threads_.emplace_back(
          [answer = it->second, d = directive.upload_checkpoint(), f = fetch_] { answer(d, *f); });
    }
    return absl::OkStatus();
  }
  std::string IdentityOf(const TaskRef& task) override { return absl::StrCat("host-", task.index); }

  void Connect(int index, Answer answer) {
    absl::MutexLock l(&mu_);
    connected_.insert(index);
    answers_[index] = std::move(answer);
  }
  void set_fetch(CheckpointFetch* f) { fetch_ = f; }
  std::vector<std::string> asked() {
    absl::MutexLock l(&mu_);
    return asked_;
  }
  v1::GetJobResponse job_;

 private:
  absl::Mutex mu_;
  std::set<int> connected_;
  std::map<int, Answer> answers_;
  std::vector<std::string> asked_;
  std::vector<std::thread> threads_;
  CheckpointFetch* fetch_ = nullptr;
};

// The worker's side: the first message, then `bytes` in chunks, the last marked; `stop_after`
// chunks (when >= 0) ends the stream early, as a worker killed mid-upload does.
struct Upload {
  std::string identity;   // the caller's certificate identity
  int task_index = -1;    // -1: the task asked
  int64_t announce = -1;  // -1: bytes.size()
  int stop_after = -1;
  size_t chunk = 64 << 10;
  absl::Status* result = nullptr;
};

absl::Status RunUpload(CheckpointFetch& fetch, const v1::UploadCheckpoint& d,
                       const std::string& bytes, const Upload& u) {
  std::vector<v1::CheckpointUploadChunk> messages;
  v1::CheckpointUploadChunk first;
  first.set_fetch_id(d.fetch_id());
  *first.mutable_task() = d.task();
  if (u.task_index >= 0) first.mutable_task()->set_index(u.task_index);
  first.set_step(40);
  first.set_total_bytes(u.announce >= 0 ? u.announce : static_cast<int64_t>(bytes.size()));
  first.set_file("/ckpt/ckpt-0000000040.lsckpt");
  messages.push_back(first);
  for (size_t at = 0; at < bytes.size(); at += u.chunk) {
    v1::CheckpointUploadChunk m;
    m.set_data(bytes.substr(at, u.chunk));
    m.set_last(at + u.chunk >= bytes.size());
    messages.push_back(std::move(m));
  }
  if (u.stop_after >= 0) messages.resize(1 + u.stop_after);
  size_t next = 0;
  return fetch.Upload(u.identity, [&](v1::CheckpointUploadChunk* m) {
    if (next == messages.size()) return false;
    *m = messages[next++];
    return true;
  });
}

Answer Uploads(std::string bytes, Upload u) {
  return [bytes = std::move(bytes), u](const v1::UploadCheckpoint& d, CheckpointFetch& f) {
    absl::Status s = RunUpload(f, d, bytes, u);
    if (u.result != nullptr) *u.result = s;
  };
}

Answer HasNone() {
  return [](const v1::UploadCheckpoint& d, CheckpointFetch& f) {
    v1::CheckpointUploadChunk m;
    m.set_fetch_id(d.fetch_id());
    *m.mutable_task() = d.task();
    m.set_error_code(static_cast<int>(absl::StatusCode::kNotFound));
    m.set_error_message("no checkpoint of " + d.job_id() + " under /state/checkpoints");
    bool sent = false;
    EXPECT_TRUE(
        f.Upload(absl::StrCat("host-", d.task().index()), [&](v1::CheckpointUploadChunk* out) {
           if (sent) return false;
           *out = m;
           return sent = true;
         }).ok());
  };
}

struct Fetched {
  absl::Status status;
  v1::CheckpointChunk header;
  std::string bytes;
  bool last = false;
};

Fetched RunFetch(CheckpointFetch& fetch, int64_t step = 0, const std::string& job = kJob) {
  Fetched out;
  bool first = true;
  v1::FetchCheckpointRequest request;
  request.set_job_id(job);
  request.set_step(step);
  out.status = fetch.Fetch(
      request,
      [&](const v1::CheckpointChunk& c) {
        if (first) {
          out.header = c;
          first = false;
        } else {
          EXPECT_EQ(c.offset(), static_cast<int64_t>(out.bytes.size()));
          out.bytes += c.data();
          out.last = c.last();
        }
        return true;
      },
      [] { return false; });
  return out;
}

class CheckpointFetchTest : public ::testing::Test {
 protected:
  CheckpointFetchTest() : fetch_(&cluster_, Clock::Real(), Options()) {
    cluster_.set_fetch(&fetch_);
  }
  static CheckpointFetchOptions Options() {
    CheckpointFetchOptions o;
    o.queue_chunks = 2;
    o.start_timeout = absl::Seconds(2);
    o.stall_timeout = absl::Seconds(2);
    o.poll = absl::Milliseconds(20);
    return o;
  }
  FakeCluster cluster_;
  CheckpointFetch fetch_;
};

TEST_F(CheckpointFetchTest, RelaysTheChiefsCheckpointWholeAndChecked) {
  const std::string bytes = Checkpoint(kUid, 40);
  absl::Status uploaded = absl::UnknownError("not run");
  cluster_.Connect(0, Uploads(bytes, {.identity = "host-0", .result = &uploaded}));
  Fetched got = RunFetch(fetch_);
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.bytes, bytes);
  EXPECT_TRUE(got.last);
  EXPECT_EQ(got.header.step(), 40);
  EXPECT_EQ(got.header.total_bytes(), static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(got.header.source().index(), 0);
  EXPECT_EQ(cluster_.asked(), std::vector<std::string>{"worker/0"});
  cluster_.Join();
  EXPECT_TRUE(uploaded.ok()) << uploaded;
}

TEST_F(CheckpointFetchTest, FallsBackToAnotherHolderWhenTheChiefHasNone) {
  const std::string bytes = Checkpoint(kUid, 40);
  cluster_.Connect(0, HasNone());
  cluster_.Connect(1, Uploads(bytes, {.identity = "host-1"}));
  Fetched got = RunFetch(fetch_);
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.bytes, bytes);
  EXPECT_EQ(got.header.source().index(), 1);
  EXPECT_EQ(cluster_.asked(), (std::vector<std::string>{"worker/0", "worker/1"}));
}

TEST_F(CheckpointFetchTest, NoHolderConnectedIsUnavailableNamingTheJobAndEveryTask) {
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kUnavailable) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), kJob)) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "worker/0 (the chief): worker/0 is LOST"))
      << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "worker/1: ")) << got.status;
}

TEST_F(CheckpointFetchTest, NoHolderWithTheCheckpointIsFailedPrecondition) {
  cluster_.Connect(0, HasNone());
  cluster_.Connect(1, HasNone());
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kFailedPrecondition) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "no checkpoint of job-000007")) << got.status;
}

TEST_F(CheckpointFetchTest, AHolderThatNeverAnswersTimesOutNamingIt) {
  cluster_.Connect(0, [](const v1::UploadCheckpoint&, CheckpointFetch&) {});
  const absl::Time start = absl::Now();
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kFailedPrecondition) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "worker/0 (the chief): did not answer"))
      << got.status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(CheckpointFetchTest, AnUploaderThatIsNotTheTaskAskedIsRefused) {
  const std::string bytes = Checkpoint(kUid, 40);
  absl::Status other_task, other_identity;
  // worker/0's answer claims to be worker/1; then comes from worker/1's identity.
  cluster_.Connect(0, [&](const v1::UploadCheckpoint& d, CheckpointFetch& f) {
    other_task = RunUpload(f, d, bytes, {.identity = "host-1", .task_index = 1});
    other_identity = RunUpload(f, d, bytes, {.identity = "host-1"});
  });
  Fetched got = RunFetch(fetch_);
  EXPECT_FALSE(got.status.ok());
  EXPECT_EQ(other_task.code(), absl::StatusCode::kPermissionDenied) << other_task;
  EXPECT_TRUE(absl::StrContains(other_task.message(), "asked worker/0, not worker/1"))
      << other_task;
  EXPECT_EQ(other_identity.code(), absl::StatusCode::kPermissionDenied) << other_identity;
  EXPECT_TRUE(absl::StrContains(other_identity.message(), "identity host-1 does not hold worker/0"))
      << other_identity;
  EXPECT_TRUE(got.bytes.empty()) << "nothing of a refused upload reaches the client";
}

TEST_F(CheckpointFetchTest, AnUploadForNoWaitingFetchIsNotFound) {
  v1::UploadCheckpoint d;
  d.set_fetch_id("00112233445566778899aabbccddeeff");
  d.mutable_task()->set_type("worker");
  absl::Status s = RunUpload(fetch_, d, Checkpoint(kUid, 40), {.identity = "host-0"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

TEST_F(CheckpointFetchTest, AnOversizeCheckpointIsRefusedBeforeAnyByte) {
  absl::StatusOr<int64_t> bound = checkpoint::CheckpointBytesBound(cluster_.job_.spec());
  ASSERT_TRUE(bound.ok()) << bound.status();
  absl::Status uploaded;
  cluster_.Connect(0, Uploads(Checkpoint(kUid, 40),
                              {.identity = "host-0", .announce = *bound + 1, .result = &uploaded}));
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kFailedPrecondition) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "over the job's bound")) << got.status;
  EXPECT_TRUE(got.bytes.empty());
  cluster_.Join();
  EXPECT_EQ(uploaded.code(), absl::StatusCode::kResourceExhausted) << uploaded;
}

TEST_F(CheckpointFetchTest, AnUploaderKilledMidStreamFailsTheClientFastNamingTheJob) {
  const std::string bytes = Checkpoint(kUid, 40);
  cluster_.Connect(0, Uploads(bytes, {.identity = "host-0", .stop_after = 2}));
  const absl::Time start = absl::Now();
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kUnavailable) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "job job-000007: worker/0 stopped sending"))
      << got.status;
  EXPECT_FALSE(got.last);
  EXPECT_LT(got.bytes.size(), bytes.size());
  EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "no wait for a timeout";
}

TEST_F(CheckpointFetchTest, ACorruptOrForeignCheckpointNeverReachesTheClientWhole) {
  std::string corrupt = Checkpoint(kUid, 40);
  corrupt[corrupt.size() - 10] ^= 1;
  cluster_.Connect(0, Uploads(corrupt, {.identity = "host-0"}));
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kDataLoss) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "payload CRC mismatch")) << got.status;
  EXPECT_FALSE(got.last);
  EXPECT_LT(got.bytes.size(), corrupt.size()) << "the last chunk is held back";

  cluster_.Join();
  cluster_.Connect(0, Uploads(Checkpoint("job-000001@5", 40), {.identity = "host-0"}));
  got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kDataLoss) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "of job \"job-000001@5\"")) << got.status;
}

TEST_F(CheckpointFetchTest, AStepNoHolderOffersIsFailedPrecondition) {
  cluster_.Connect(0, Uploads(Checkpoint(kUid, 40), {.identity = "host-0"}));
  Fetched got = RunFetch(fetch_, /*step=*/30);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kFailedPrecondition) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "offered step 40, not 30")) << got.status;
}

TEST_F(CheckpointFetchTest, UnknownAndNeverRunJobs) {
  EXPECT_EQ(RunFetch(fetch_, 0, "job-000999").status.code(), absl::StatusCode::kNotFound);
  cluster_.job_.mutable_job()->clear_attempt_workers();
  cluster_.job_.mutable_job()->set_state(v1::PENDING);
  Fetched got = RunFetch(fetch_);
  EXPECT_EQ(got.status.code(), absl::StatusCode::kFailedPrecondition) << got.status;
  EXPECT_TRUE(absl::StrContains(got.status.message(), "never ran")) << got.status;
  EXPECT_EQ(RunFetch(fetch_, -1).status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep

#include "checkpoint/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/crc32c.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::checkpoint {
namespace {

using ::lockstep::v1::Checkpoint;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh directory per test, under TEST_TMPDIR.
std::string TestDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = std::string(base != nullptr ? base : "/tmp") + "/checkpoint_test_" +
                    info->name() + "_" + std::to_string(::getpid());
  EXPECT_TRUE(MakeDirs(dir).ok());
  return dir;
}

Checkpoint MakeCheckpoint(int64_t step) {
  Checkpoint c;
  c.set_job_id("job-000007");
  c.set_attempt(2);
  c.set_global_step(step);
  c.set_created_unix_micros(1700000000000000 + step);
  for (const char* name : {"dense/kernel", "dense/bias"}) {
    lockstep::v1::NamedTensor* v = c.add_variables();
    v->set_name(name);
    v->mutable_tensor()->set_dtype(lockstep::v1::F32);
    v->mutable_tensor()->mutable_shape()->add_dims(3);
    float values[3] = {1.5f * step, -2.0f, 0.25f};
    v->mutable_tensor()->set_content(reinterpret_cast<const char*>(values), sizeof(values));
  }
  lockstep::v1::NamedTensor* slot = c.add_optimizer_slots();
  slot->set_name("dense/kernel/momentum");
  slot->mutable_tensor()->set_dtype(lockstep::v1::F32);
  slot->mutable_tensor()->mutable_shape()->add_dims(1);
  slot->mutable_tensor()->set_content(std::string(4, '\x01'));
  c.mutable_data_position()->set_iterator_state("opaque\0state", 12);
  c.mutable_data_position()->set_epoch(3);
  c.mutable_data_position()->set_element(step * 256);
  return c;
}

std::unique_ptr<CheckpointManager> MakeManager(const std::string& dir, int keep_last) {
  absl::StatusOr<std::unique_ptr<CheckpointManager>> m =
      CheckpointManager::Create({.dir = dir, .keep_last = keep_last});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

void OverwriteByte(const std::string& path, off_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
  c ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
  ::close(fd);
}

TEST(CheckpointTest, SaveThenRestoreRoundTrips) {
  std::string dir = TestDir();
  auto manager = MakeManager(dir, 3);
  ASSERT_NE(manager, nullptr);
  Checkpoint saved = MakeCheckpoint(42);
  absl::StatusOr<std::string> path = manager->Save(saved);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir + "/ckpt-0000000042.lsckpt");

  absl::StatusOr<CheckpointManager::Restored> restored = CheckpointManager::RestoreLatest(dir);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->path, *path);
  EXPECT_EQ(restored->checkpoint.SerializeAsString(), saved.SerializeAsString());
  EXPECT_EQ(restored->checkpoint.data_position().iterator_state(),
            std::string("opaque\0state", 12));
  EXPECT_EQ(restored->checkpoint.data_position().element(), 42 * 256);
}

TEST(CheckpointTest, KeepsOnlyTheNewestK) {
  std::string dir = TestDir();
  auto manager = MakeManager(dir, 3);
  ASSERT_NE(manager, nullptr);
  for (int64_t step : {10, 20, 30, 40, 50}) ASSERT_TRUE(manager->Save(MakeCheckpoint(step)).ok());
  EXPECT_THAT(DirEntries(dir), ElementsAre("ckpt-0000000030.lsckpt", "ckpt-0000000040.lsckpt",
                                           "ckpt-0000000050.lsckpt"));
  absl::StatusOr<std::vector<std::string>> list = CheckpointManager::List(dir);
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, ElementsAre(dir + "/ckpt-0000000050.lsckpt", dir + "/ckpt-0000000040.lsckpt",
                                 dir + "/ckpt-0000000030.lsckpt"));
  EXPECT_EQ(CheckpointManager::RestoreLatest(dir)->checkpoint.global_step(), 50);
}

// Two jobs share a checkpoint directory: each names its files by its job_uid, so neither
// overwrites the other's step nor prunes the other's files.
TEST(CheckpointTest, PruningKeepsAnotherJobsFiles) {
  std::string dir = TestDir();
  auto manager = MakeManager(dir, 2);
  ASSERT_NE(manager, nullptr);
  for (int64_t step : {10, 20}) {
    Checkpoint c = MakeCheckpoint(step);
    c.set_job_uid("job-000001@17");
    ASSERT_TRUE(manager->Save(c).ok());
  }
  // A file of a job whose uid has characters that are not kept in names.
  Checkpoint odd = MakeCheckpoint(5);
  odd.set_job_uid("a/b c");
  ASSERT_TRUE(manager->Save(odd).ok());
  for (int64_t step : {10, 20, 30, 40}) {
    Checkpoint c = MakeCheckpoint(step);
    c.set_job_uid("job-000002@18");
    absl::StatusOr<std::string> path = manager->Save(c);
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, dir + "/" + CheckpointManager::FileName(step, "job-000002@18"));
  }
  EXPECT_THAT(
      DirEntries(dir),
      ElementsAre("ckpt-0000000005.a_b_c.lsckpt", "ckpt-0000000010.job-000001@17.lsckpt",
                  "ckpt-0000000020.job-000001@17.lsckpt", "ckpt-0000000030.job-000002@18.lsckpt",
                  "ckpt-0000000040.job-000002@18.lsckpt"));
  EXPECT_EQ(CheckpointManager::ReadFile(dir + "/ckpt-0000000020.job-000001@17.lsckpt")->job_uid(),
            "job-000001@17");
  absl::StatusOr<std::vector<std::string>> mine =
      CheckpointManager::ListOfJob(dir, "job-000001@17");
  ASSERT_TRUE(mine.ok());
  EXPECT_THAT(*mine, ElementsAre(dir + "/ckpt-0000000020.job-000001@17.lsckpt",
                                 dir + "/ckpt-0000000010.job-000001@17.lsckpt"));
  EXPECT_EQ(CheckpointManager::List(dir)->size(), 5u);
}

TEST(CheckpointTest, StepsPastTenDigitsSortNumerically) {
  std::string dir = TestDir();
  auto manager = MakeManager(dir, 5);
  ASSERT_NE(manager, nullptr);
  ASSERT_TRUE(manager->Save(MakeCheckpoint(9999999999)).ok());
  ASSERT_TRUE(manager->Save(MakeCheckpoint(10000000000)).ok());
  EXPECT_EQ(CheckpointManager::RestoreLatest(dir)->checkpoint.global_step(), 10000000000);
}

TEST(CheckpointTest, TruncatedNewestIsSkipped) {
  std::string dir = TestDir();
  auto manager = MakeManager(dir, 5);
  ASSERT_NE(manager, nullptr);
  ASSERT_TRUE(manager->Save(MakeCheckpoint(1)).ok());
  std::string newest = *manager->Save(MakeCheckpoint(2));
  // Shrinking only: each size cuts the file shorter than the one before.
  for (off_t size : {off_t{CheckpointManager::kHeaderSize + 5}, off_t{10}, off_t{0}}) {
    ASSERT_EQ(::truncate(newest.c_str(), size), 0);
    absl::Status read = CheckpointManager::ReadFile(newest).status();
    EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(read.message(), HasSubstr("truncated"));
    EXPECT_THAT(read.message(), HasSubstr(newest));
    absl::StatusOr<CheckpointManager::Restored> restored = CheckpointManager::RestoreLatest(dir);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_EQ(restored->checkpoint.global_step(), 1);
  }
}

TEST(CheckpointTest, FlippedByteIsSkipped) {
  std::string dir = TestDir();
  auto manager = MakeManager(dir, 5);
  ASSERT_NE(manager, nullptr);
  ASSERT_TRUE(manager->Save(MakeCheckpoint(1)).ok());
  std::string newest = *manager->Save(MakeCheckpoint(2));
  OverwriteByte(newest, CheckpointManager::kHeaderSize + 7);  // in the payload
  EXPECT_THAT(CheckpointManager::ReadFile(newest).status().message(),
              HasSubstr("payload CRC mismatch"));
  EXPECT_EQ(CheckpointManager::RestoreLatest(dir)->checkpoint.global_step(), 1);
}

TEST(CheckpointTest, EveryCorruptedByteIsDetected) {
  std::string good = CheckpointManager::Encode(MakeCheckpoint(5)).value();
  ASSERT_TRUE(CheckpointManager::Decode(good).ok());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    EXPECT_EQ(CheckpointManager::Decode(bad).status().code(), absl::StatusCode::kDataLoss)
        << "flipped bit in byte " << i;
  }
  // A byte appended is caught as well.
  EXPECT_EQ(CheckpointManager::Decode(good + "x").status().code(), absl::StatusCode::kDataLoss);
}

// ReadFile reads the contents straight into the tensors (no whole-file copy beside them),
// and still catches every flipped byte; one in the payload is reported as the CRC mismatch
// it is, wherever it landed (the metadata, the table, a content).
TEST(CheckpointTest, EveryCorruptedByteInAFileIsDetected) {
  const std::string good = CheckpointManager::Encode(MakeCheckpoint(5)).value();
  const std::string path = TestDir() + "/" + CheckpointManager::FileName(5);
  auto write = [&path](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  };
  write(good);
  ASSERT_TRUE(CheckpointManager::ReadFile(path).ok());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    write(bad);
    absl::Status s = CheckpointManager::ReadFile(path).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "flipped bit in byte " << i;
    if (i >= CheckpointManager::kHeaderSize) {
      EXPECT_THAT(s.message(), HasSubstr("payload CRC mismatch")) << "byte " << i << ": " << s;
    }
  }
  write(good.substr(0, good.size() - 1));
  EXPECT_THAT(CheckpointManager::ReadFile(path).status().message(), HasSubstr("truncated"));
}

// Files of format version 1 (one serialized Checkpoint after the header) are still read.
TEST(CheckpointTest, Version1FilesAreStillRead) {
  const Checkpoint saved = MakeCheckpoint(3);
  const std::string payload = saved.SerializeAsString();
  std::string file(CheckpointManager::kHeaderSize, '\0');
  auto put = [&file](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) file[at + i] = static_cast<char>(v >> (8 * i));
  };
  put(0, CheckpointManager::kMagic, 4);
  put(4, CheckpointManager::kProtoPayloadVersion, 4);
  put(8, payload.size(), 8);
  put(16, MaskCrc32c(Crc32c(payload)), 4);
  put(20, MaskCrc32c(Crc32c(file.data(), 20)), 4);
  const std::string path = TestDir() + "/" + CheckpointManager::FileName(3);
  std::ofstream(path, std::ios::binary) << file << payload;
  absl::StatusOr<Checkpoint> read = CheckpointManager::ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), saved.SerializeAsString());
  EXPECT_EQ(CheckpointManager::Decode(file + payload)->SerializeAsString(),
            saved.SerializeAsString());
}

TEST(CheckpointTest, WrongMagicIsSkippedAndNothingValidIsNotFound) {
  std::string dir = TestDir();
  std::string path = dir + "/" + CheckpointManager::FileName(9);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WriteAll(fd, std::string(64, 'z'), path).ok());
  ::close(fd);
  EXPECT_THAT(CheckpointManager::ReadFile(path).status().message(), HasSubstr("wrong magic"));
  // The file's bytes ('z' = 0x7a) are not quoted.
  EXPECT_THAT(std::string(CheckpointManager::ReadFile(path).status().message()),
              Not(HasSubstr("7a7a")));
  absl::StatusOr<CheckpointManager::Restored> restored = CheckpointManager::RestoreLatest(dir);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(restored.status().message(), HasSubstr("1 checkpoint files skipped"));

  EXPECT_EQ(CheckpointManager::RestoreLatest(dir + "/absent").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CheckpointTest, UnwritableDirectoryIsRefused) {
  std::string file = TestDir() + "/not_a_dir";
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  absl::Status status = CheckpointManager::Create({.dir = file + "/ckpt"}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("checkpoint.dir"));
  EXPECT_THAT(status.message(), HasSubstr(file + "/ckpt"));

  status = CheckpointManager::Create({.dir = TestDir(), .keep_last = 0}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("checkpoint.keep"));
}

TEST(CheckpointTest, CrashBeforeRenameLeavesNoVisibleCheckpoint) {
  std::string dir = TestDir();
  {
    auto manager = MakeManager(dir, 5);
    ASSERT_NE(manager, nullptr);
    ASSERT_TRUE(manager->Save(MakeCheckpoint(1)).ok());
  }
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child dies between the fsynced temporary file and the rename.
    auto crashing = CheckpointManager::Create(
        {.dir = dir, .keep_last = 5, .before_rename_for_test = [](const std::string&) {
           ::_exit(0);
         }});
    if (crashing.ok()) (void)(*crashing)->Save(MakeCheckpoint(2));
    ::_exit(1);  // the hook was not reached
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "status " << wstatus;

  std::vector<std::string> entries = DirEntries(dir);
  ASSERT_EQ(entries.size(), 2u);  // the checkpoint and the crashed write's temporary file
  EXPECT_EQ(entries[1], "ckpt-0000000001.lsckpt");
  EXPECT_TRUE(absl::StartsWith(entries[0], ".ckpt-2.a2.lsckpt.tmp.")) << entries[0];
  EXPECT_THAT(*CheckpointManager::List(dir), ElementsAre(dir + "/ckpt-0000000001.lsckpt"));
  EXPECT_EQ(CheckpointManager::RestoreLatest(dir)->checkpoint.global_step(), 1);

  // The next attempt's manager removes the leftover.
  ASSERT_TRUE(CheckpointManager::Create({.dir = dir, .keep_last = 5, .attempt = 3}).ok());
  EXPECT_THAT(DirEntries(dir), ElementsAre("ckpt-0000000001.lsckpt"));
}

// Two jobs checkpoint into one directory: a manager created for one while the other's
// temporary file is in flight (between its fsync and its rename) leaves that file alone, so
// the other's Save() completes. A job's own leftovers, of an earlier attempt, are removed;
// another job's never are.
TEST(CheckpointTest, TwoJobsInOneDirectoryKeepEachOthersInFlightFiles) {
  std::string dir = TestDir();
  std::string in_flight;
  absl::Status other_created;
  auto writer = CheckpointManager::Create(
      {.dir = dir,
       .keep_last = 5,
       .job_uid = "job-000001@1",
       .attempt = 1,
       .before_rename_for_test = [&](const std::string& temp_path) {
         in_flight = temp_path;
         // Job 2 starts (its chief creates its manager) in the same directory now.
         other_created = CheckpointManager::Create(
                             {.dir = dir, .keep_last = 5, .job_uid = "job-000002@2", .attempt = 1})
                             .status();
       }});
  ASSERT_TRUE(writer.ok()) << writer.status();
  Checkpoint a = MakeCheckpoint(10);
  a.set_job_uid("job-000001@1");
  a.set_attempt(1);
  absl::StatusOr<std::string> saved = (*writer)->Save(a);
  ASSERT_TRUE(other_created.ok()) << other_created;
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_THAT(in_flight, HasSubstr("/" + CheckpointManager::TempPrefix(10, "job-000001@1", 1)));
  EXPECT_EQ(CheckpointManager::ReadFile(*saved)->job_uid(), "job-000001@1");

  // Leftovers of crashed writes: job 1's attempt 1, job 2's attempt 1.
  for (const std::string& prefix : {CheckpointManager::TempPrefix(20, "job-000001@1", 1),
                                    CheckpointManager::TempPrefix(20, "job-000002@2", 1)}) {
    ASSERT_TRUE(static_cast<bool>(std::ofstream(dir + "/" + prefix + "abcdef") << "partial"));
  }
  // Job 2's next attempt removes its own and keeps job 1's.
  ASSERT_TRUE(CheckpointManager::Create(
                  {.dir = dir, .keep_last = 5, .job_uid = "job-000002@2", .attempt = 2})
                  .ok());
  EXPECT_THAT(DirEntries(dir),
              ElementsAre(CheckpointManager::TempPrefix(20, "job-000001@1", 1) + "abcdef",
                          "ckpt-0000000010.job-000001@1.lsckpt"));
}

// The size a checkpoint may have is not bound by protobuf's limit on one message (2 GiB):
// only the metadata is a message; the tensors' contents are framed beside it with 64-bit
// lengths. The limit is faked small here (a 16 GiB model's contents in memory are not a
// unit test): contents many times over it are written, read back and restored whole, while
// version 1 (everything in one message) could not even be encoded under it.
TEST(CheckpointTest, ContentsOverTheMessageLimitRoundTrip) {
  constexpr size_t kFakeLimit = 4096;  // stands for protobuf's 2 GiB
  Checkpoint big = MakeCheckpoint(7);
  big.set_job_uid("big@1");
  std::string content(256 * 1024, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 131 + i / 7);
  big.mutable_variables(0)->mutable_tensor()->set_content(content);
  big.mutable_optimizer_slots(0)->mutable_tensor()->set_content(content.substr(3));
  ASSERT_GT(big.ByteSizeLong(), 60 * kFakeLimit);

  const std::string dir = TestDir();
  auto manager = CheckpointManager::Create(
      {.dir = dir, .keep_last = 2, .job_uid = "big@1", .max_message_bytes_for_test = kFakeLimit});
  ASSERT_TRUE(manager.ok()) << manager.status();
  absl::StatusOr<std::string> path = (*manager)->Save(big);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<Checkpoint> read = CheckpointManager::ReadFile(*path, kFakeLimit);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), big.SerializeAsString());
  // The same bytes as Encode, which the data plane broadcasts.
  absl::StatusOr<std::string> encoded = CheckpointManager::Encode(big, kFakeLimit);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(*encoded, *ReadFileToString(*path));
  EXPECT_EQ(CheckpointManager::Decode(*encoded, kFakeLimit)->SerializeAsString(),
            big.SerializeAsString());

  // Metadata over the limit is refused when written, naming the size, not written as a
  // file that never reads back.
  Checkpoint named = big;
  named.mutable_data_position()->set_iterator_state(std::string(2 * kFakeLimit, 'x'));
  absl::StatusOr<std::string> refused = (*manager)->Save(named);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("bytes one protobuf message may hold"));
  EXPECT_EQ(CheckpointManager::Encode(named, kFakeLimit).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(*CheckpointManager::List(dir), ElementsAre(*path));
}

// Lengths past 4 GiB are read as 64-bit numbers: a tensor table that claims more than the
// file holds is refused naming the sizes, before anything is allocated for it.
TEST(CheckpointTest, MultiGiBLengthsAreCheckedNotTruncated) {
  std::string good = CheckpointManager::Encode(MakeCheckpoint(5)).value();
  // Payload: u64 M, M bytes of metadata, u64 N, N lengths, contents.
  const size_t header = CheckpointManager::kHeaderSize;
  uint64_t meta = 0;
  for (int i = 0; i < 8; ++i) meta |= uint64_t{static_cast<uint8_t>(good[header + i])} << (8 * i);
  const size_t first_length = header + 8 + meta + 8;
  const uint64_t huge = (uint64_t{5} << 30) + 12;  // 5 GiB + 12: 12 as an int32
  std::string payload = good.substr(header);
  for (int i = 0; i < 8; ++i)
    payload[first_length - header + i] = static_cast<char>(huge >> (8 * i));
  // Re-frame it with valid CRCs, so that only the length is wrong.
  std::string file(header, '\0');
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) file[at + i] = static_cast<char>(v >> (8 * i));
  };
  put32(0, CheckpointManager::kMagic);
  put32(4, CheckpointManager::kFormatVersion);
  for (int i = 0; i < 8; ++i) file[8 + i] = static_cast<char>(uint64_t{payload.size()} >> (8 * i));
  put32(16, MaskCrc32c(Crc32c(payload)));
  put32(20, MaskCrc32c(Crc32c(file.data(), 20)));
  absl::Status s = CheckpointManager::Decode(file + payload).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("tensor 0 of 5368709132 bytes runs past"));
}

}  // namespace
}  // namespace lockstep::checkpoint

#include "common/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

std::string TmpFile(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(CheckSecretModeTest, OwnerOnlyIsPrivate) {
  EXPECT_TRUE(CheckSecretMode("k", "--tls_key", 1000, S_IFREG | 0600).ok());
  EXPECT_TRUE(CheckSecretMode("k", "--tls_key", 1000, S_IFREG | 0400).ok());
  EXPECT_TRUE(CheckSecretMode("k", "--tls_key", 0, S_IFREG | 0600).ok());
}

TEST(CheckSecretModeTest, WorldReadableIsRefusedNamingTheFileAndTheFix) {
  for (uid_t owner : {0u, 1000u}) {
    absl::Status s = CheckSecretMode("/etc/x/host.key", "--tls_key", owner, S_IFREG | 0644);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("--tls_key: /etc/x/host.key is open to every user"));
    EXPECT_THAT(s.message(), HasSubstr("mode 0644"));
    EXPECT_THAT(s.message(), HasSubstr("chmod 600 /etc/x/host.key"));
  }
  for (mode_t mode : {0604, 0602 /* writable */}) {
    const absl::Status s = CheckSecretMode("t", "--tokens_file", 0, S_IFREG | mode);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_THAT(s.message(), HasSubstr("--tokens_file: t is open to every user")) << s;
  }
}

TEST(CheckSecretModeTest, GroupReadableOnlyWhenRootOwnsIt) {
  // A Kubernetes Secret volume with fsGroup (root:fsGroup 0440), a systemd group's file
  // (root:lockstep-coordinator 0640): the administrator chose the group.
  EXPECT_TRUE(CheckSecretMode("k", "--tls_key", 0, S_IFREG | 0440).ok());
  EXPECT_TRUE(CheckSecretMode("k", "--tls_key", 0, S_IFREG | 0640).ok());
  // The daemon's own (or anyone else's) file readable by a group it cannot vouch for.
  absl::Status s = CheckSecretMode("tokens", "--tokens_file", 1000, S_IFREG | 0640);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("--tokens_file: tokens is open to its group"));
  EXPECT_THAT(s.message(), HasSubstr("owner uid 1000"));
  // Group write is refused even for root's files.
  const absl::Status group_write = CheckSecretMode("k", "--tls_key", 0, S_IFREG | 0660);
  EXPECT_EQ(group_write.code(), absl::StatusCode::kPermissionDenied) << group_write;
  EXPECT_THAT(group_write.message(), HasSubstr("--tls_key: k is open to its group"));
}

TEST(CheckSecretFileTest, ReadsTheModeFromTheFile) {
  const std::string path = TmpFile("check.key");
  std::ofstream(path) << "secret";
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  absl::Status s = CheckSecretFile(path, "--tls_key");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("chmod 600 " + path));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  EXPECT_TRUE(CheckSecretFile(path, "--tls_key").ok());
  // Through a link (Kubernetes mounts Secrets as links into ..data/): the target's mode.
  const std::string link = TmpFile("check-link.key");
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  EXPECT_TRUE(CheckSecretFile(link, "--tls_key").ok());
  ASSERT_EQ(::chmod(path.c_str(), 0604), 0);
  const absl::Status opened = CheckSecretFile(link, "--tls_key");
  EXPECT_EQ(opened.code(), absl::StatusCode::kPermissionDenied) << opened;
  EXPECT_THAT(opened.message(), HasSubstr("is open to every user (mode 0604")) << opened;

  absl::Status missing = CheckSecretFile(TmpFile("nothing.key"), "--tls_key");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("--tls_key: cannot read"));
}

TEST(WritePrivateFileTest, WritesOwnerOnlyAndReplacesAnOpenFile) {
  const std::string path = TmpFile("private");
  ::unlink(path.c_str());
  ASSERT_TRUE(WritePrivateFile(path, "first\n").ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  std::ofstream(TmpFile("open")) << "x";  // made with the umask's mode, e.g. 0644
  ASSERT_EQ(::chmod(TmpFile("open").c_str(), 0644), 0);
  ASSERT_TRUE(WritePrivateFile(TmpFile("open"), "second\n").ok());
  EXPECT_EQ(ModeOf(TmpFile("open")), 0600u);
  std::stringstream text;
  text << std::ifstream(TmpFile("open")).rdbuf();
  EXPECT_EQ(text.str(), "second\n");

  absl::Status s = WritePrivateFile(TmpFile("no/such/dir/file"), "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir/file"));
}

}  // namespace
}  // namespace lockstep

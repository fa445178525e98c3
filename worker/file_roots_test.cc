#include "worker/file_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// A confinement refusal: INVALID_ARGUMENT naming the field and the path, saying it is outside
// the roots of `kind` ("data", "output") and naming the flag that adds one.
void ExpectOutside(const absl::Status& s, const std::string& field, const std::string& path,
                   const std::string& kind) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), StartsWith(field + ": '" + path + "'"));
  EXPECT_THAT(Msg(s), HasSubstr("is outside this worker's " + kind + " roots"));
  EXPECT_THAT(Msg(s), HasSubstr(kind == "data" ? "--data_root" : "--output_root"));
}

// A fresh directory per test: <dir>/data (a root), <dir>/out (a root), <dir>/secret.
class FileRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (const char* d : {"", "/data", "/data/sub", "/out", "/secret"}) {
      ::mkdir((dir_ + d).c_str(), 0755);
    }
    Write(dir_ + "/data/train.csv");
    Write(dir_ + "/data/sub/eval.csv");
    Write(dir_ + "/secret/key");
    auto roots = FileRoots::Create({dir_ + "/data"}, {dir_ + "/out"});
    ASSERT_TRUE(roots.ok()) << roots.status();
    roots_ = std::make_unique<FileRoots>(*std::move(roots));
  }
  static void Write(const std::string& path) { std::ofstream(path) << "1,2\n"; }

  std::string dir_;
  std::unique_ptr<FileRoots> roots_;
};

TEST_F(FileRootsTest, DataInsideTheRootsResolvesRelativeOrAbsolute) {
  EXPECT_EQ(roots_->ResolveData("train.csv", "data.train.files[0]").value(),
            dir_ + "/data/train.csv");
  EXPECT_EQ(roots_->ResolveData(dir_ + "/data/sub/eval.csv", "data.eval.files[0]").value(),
            dir_ + "/data/sub/eval.csv");
  EXPECT_EQ(roots_->ResolveData("./sub//eval.csv", "f").value(), dir_ + "/data/sub/eval.csv");
  // A missing file inside a root is the reader's to report.
  EXPECT_EQ(roots_->ResolveData("missing.csv", "f").value(), dir_ + "/data/missing.csv");
}

TEST_F(FileRootsTest, DataOutsideTheRootsIsRefusedNamingTheFieldAndTheFlag) {
  absl::Status outside = roots_->ResolveData(dir_ + "/secret/key", "data.train.files[1]").status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument) << outside;
  EXPECT_THAT(Msg(outside), StartsWith("data.train.files[1]: '" + dir_ + "/secret/key'"));
  EXPECT_THAT(Msg(outside), HasSubstr("outside this worker's data roots (" + dir_ + "/data)"));
  EXPECT_THAT(Msg(outside), HasSubstr("--data_root"));
  // Files that exist and that this process can read: refused for where they are, not for
  // being missing.
  for (const std::string& readable : {std::string("/etc/passwd"), dir_ + "/secret/key"}) {
    ASSERT_EQ(::access(readable.c_str(), R_OK), 0) << readable;
    ExpectOutside(roots_->ResolveData(readable, "f").status(), "f", readable, "data");
  }
  // A missing file outside is refused in the same words as an existing one: the refusal
  // does not tell whether it exists (a missing file inside a root resolves, see above).
  absl::Status missing = roots_->ResolveData("/nonexistent/file", "f").status();
  ExpectOutside(missing, "f", "/nonexistent/file", "data");
  EXPECT_THAT(Msg(missing), Not(HasSubstr("No such file")));
  absl::Status dotdot = roots_->ResolveData("../secret/key", "data.eval.files[0]").status();
  EXPECT_EQ(dotdot.code(), absl::StatusCode::kInvalidArgument) << dotdot;
  EXPECT_THAT(Msg(dotdot),
              StartsWith("data.eval.files[0]: '../secret/key' must be a file path with no '..'"));
  // Outputs are no data: a root for one is not a root for the other.
  Write(dir_ + "/out/written.csv");
  ExpectOutside(roots_->ResolveData(dir_ + "/out/written.csv", "f").status(), "f",
                dir_ + "/out/written.csv", "data");
}

TEST_F(FileRootsTest, SymlinksThatLeaveARootAreRefused) {
  ASSERT_EQ(::symlink((dir_ + "/secret/key").c_str(), (dir_ + "/data/link.csv").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/secret").c_str(), (dir_ + "/data/escape").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/secret").c_str(), (dir_ + "/out/escape").c_str()), 0);
  absl::Status file = roots_->ResolveData("link.csv", "data.train.files[0]").status();
  ExpectOutside(file, "data.train.files[0]", "link.csv", "data");
  EXPECT_THAT(Msg(file), HasSubstr("(" + dir_ + "/secret/key) is outside"));
  absl::Status dir_link = roots_->ResolveData("escape/key", "f").status();
  ExpectOutside(dir_link, "f", "escape/key", "data");
  EXPECT_THAT(Msg(dir_link), HasSubstr("(" + dir_ + "/secret/key) is outside"));
  absl::Status out = roots_->ResolveOutput("escape/ckpt", "checkpoint.dir").status();
  EXPECT_EQ(out.code(), absl::StatusCode::kInvalidArgument) << out;
  EXPECT_THAT(Msg(out), StartsWith("checkpoint.dir: 'escape/ckpt' (" + dir_ + "/secret/ckpt)"));
  EXPECT_THAT(Msg(out), HasSubstr("--output_root"));
  // A symlink that stays inside its root is fine.
  ASSERT_EQ(::symlink((dir_ + "/data/train.csv").c_str(), (dir_ + "/data/alias.csv").c_str()), 0);
  EXPECT_EQ(roots_->ResolveData("alias.csv", "f").value(), dir_ + "/data/train.csv");
}

TEST_F(FileRootsTest, OutputsResolveUnderTheRootAlsoBeforeTheyExist) {
  EXPECT_EQ(roots_->ResolveOutput("runs/a/ckpt", "checkpoint.dir").value(),
            dir_ + "/out/runs/a/ckpt");
  EXPECT_EQ(roots_->ResolveOutput(dir_ + "/out/tb/", "summaries.dir").value(), dir_ + "/out/tb");
  EXPECT_EQ(roots_->ResolveOutput(dir_ + "/out", "summaries.dir").value(), dir_ + "/out");
  // Existing directories outside the output root (the test's own directory, /proc/self) are
  // refused for where they are.
  ExpectOutside(roots_->ResolveOutput(dir_ + "/secret", "summaries.dir").status(), "summaries.dir",
                dir_ + "/secret", "output");
  ExpectOutside(roots_->ResolveOutput(dir_ + "/outside", "summaries.dir").status(), "summaries.dir",
                dir_ + "/outside", "output");
  absl::Status dotdot = roots_->ResolveOutput(dir_ + "/out/../secret", "summaries.dir").status();
  EXPECT_EQ(dotdot.code(), absl::StatusCode::kInvalidArgument) << dotdot;
  EXPECT_THAT(Msg(dotdot), HasSubstr("no '..' component"));
  ASSERT_EQ(::access("/proc/self", F_OK), 0);
  absl::Status proc = roots_->ResolveOutput("/proc/self", "checkpoint.dir").status();
  ExpectOutside(proc, "checkpoint.dir", "/proc/self", "output");
}

TEST_F(FileRootsTest, ResolveSpecRewritesEveryPathOrNamesTheFirstRefusal) {
  v1::JobSpec spec;
  spec.mutable_data()->mutable_train()->add_files("train.csv");
  spec.mutable_data()->mutable_eval()->add_files("sub/eval.csv");
  spec.mutable_checkpoint()->set_dir("ckpt");
  spec.mutable_summaries()->set_dir(dir_ + "/out/tb");
  v1::JobSpec resolved = spec;
  ASSERT_TRUE(roots_->ResolveSpec(&resolved).ok());
  EXPECT_THAT(resolved.data().train().files(), ElementsAre(dir_ + "/data/train.csv"));
  EXPECT_THAT(resolved.data().eval().files(), ElementsAre(dir_ + "/data/sub/eval.csv"));
  EXPECT_EQ(resolved.checkpoint().dir(), dir_ + "/out/ckpt");
  EXPECT_EQ(resolved.summaries().dir(), dir_ + "/out/tb");

  v1::JobSpec no_eval;
  no_eval.mutable_data()->mutable_train()->add_files("train.csv");
  ASSERT_TRUE(roots_->ResolveSpec(&no_eval).ok());
  EXPECT_FALSE(no_eval.data().has_eval());

  v1::JobSpec init_from = spec;
  init_from.mutable_init_from()->set_path("train.csv");
  ASSERT_TRUE(roots_->ResolveSpec(&init_from).ok());
  EXPECT_EQ(init_from.init_from().path(), dir_ + "/data/train.csv");
  init_from.mutable_init_from()->set_path("/etc/passwd");
  EXPECT_THAT(Msg(roots_->ResolveSpec(&init_from)), StartsWith("init_from.path: '/etc/passwd'"));

  v1::JobSpec bad = spec;
  bad.mutable_summaries()->set_dir("/tmp");
  EXPECT_THAT(Msg(roots_->ResolveSpec(&bad)), StartsWith("summaries.dir: '/tmp'"));
}

TEST(FileRootsCreateTest, RootsMustBeAbsoluteNamingTheFlag) {
  EXPECT_THAT(Msg(FileRoots::Create({"data"}, {"/out"}).status()),
              StartsWith("--data_root: 'data' must be an absolute directory"));
  EXPECT_THAT(Msg(FileRoots::Create({"/data"}, {}).status()),
              StartsWith("--output_root: at least one directory"));
  absl::Status dotdot = FileRoots::Create({"/a/../b"}, {"/out"}).status();
  EXPECT_EQ(dotdot.code(), absl::StatusCode::kInvalidArgument) << dotdot;
  EXPECT_THAT(Msg(dotdot), StartsWith("--data_root: '/a/../b' must be an absolute directory with "
                                      "no '..' component"));
  EXPECT_THAT(SplitRoots("/a,,/b,"), ElementsAre("/a", "/b"));
}

}  // namespace
}  // namespace worker
}  // namespace lockstep

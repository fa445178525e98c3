#include "client/cli/connection.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/certs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace cli {
namespace {

using ::testing::HasSubstr;

class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/connection");
    auto ca = CertificateAuthority::Init(dir_);
    ASSERT_TRUE(ca.ok() || ca.status().code() == absl::StatusCode::kAlreadyExists);
    ca_ = CertificateAuthority::CaCertPath(dir_);
  }

  absl::StatusOr<Connection> Resolve(const std::vector<std::string>& argv) {
    auto args = CommandArgs::Parse(argv, ConnectionOptions());
    if (!args.ok()) return args.status();
    return ResolveConnection(*args, [this](const char* name) {
      auto it = env_.find(name);
      return it == env_.end() ? std::string() : it->second;
    });
  }

  // Connect() as a command named "test" runs it, with this test's environment.
  std::unique_ptr<client::JobServiceClient> ConnectWith(const std::vector<std::string>& argv) {
    auto args = CommandArgs::Parse(argv, ConnectionOptions());
    EXPECT_TRUE(args.ok()) << args.status();
    if (!args.ok()) return nullptr;
    CommandContext ctx;
    ctx.out = &out_;
    ctx.err = &err_;
    return Connect(*args, ctx, "test", absl::Seconds(1), [this](const char* name) {
      auto it = env_.find(name);
      return it == env_.end() ? std::string() : it->second;
    });
  }

  std::string WriteConfig(const std::string& text) {
    const std::string path = absl::StrCat(dir_, "/config");
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_, ca_;
  std::map<std::string, std::string> env_;
  std::ostringstream out_, err_;
};

TEST_F(ConnectionTest, FlagsWinOverTheEnvironmentWhichWinsOverTheConfigFile) {
  env_["LOCKSTEP_CONFIG"] = WriteConfig(absl::StrCat(
      "# my cluster\ncoordinator: coord:7000\nca: ", ca_, "\ntoken: from-config-0123456789\n"));
  auto c = Resolve({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->address, "coord:7000");
  EXPECT_EQ(c->tls.ca_file, ca_);
  EXPECT_EQ(c->tls.token, "from-config-0123456789");
  EXPECT_FALSE(c->tls.insecure);

  env_["LOCKSTEP_TOKEN"] = "from-env";
  env_["LOCKSTEP_COORDINATOR"] = "envhost:1";
  c = Resolve({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls.token, "from-env");
  EXPECT_EQ(c->address, "envhost:1");

  c = Resolve({"--token=from-flag", "--coordinator", "flaghost:2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls.token, "from-flag");
  EXPECT_EQ(c->address, "flaghost:2");
}

TEST_F(ConnectionTest, DefaultConfigFileUnderHomeAndDefaultAddress) {
  env_["HOME"] = dir_;
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", dir_, "/.config/lockstep").c_str()), 0);
  std::ofstream(absl::StrCat(dir_, "/.config/lockstep/config")) << "ca: " << ca_ << "\n";
  auto c = Resolve({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls.ca_file, ca_);
  EXPECT_EQ(c->address, "127.0.0.1:7000");
}

TEST_F(ConnectionTest, NeedsACaUnlessInsecure) {
  env_["HOME"] = "/nonexistent";
  auto c = Resolve({});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--tls_ca"));
  c = Resolve({"--insecure"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tls.insecure);
  env_["LOCKSTEP_INSECURE"] = "1";
  c = Resolve({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tls.insecure);
}

TEST_F(ConnectionTest, BadConfigFilesAreNamed) {
  auto c = Resolve({"--config=" + WriteConfig("coordinator: a:1\ncolour: blue\n")});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("line 2"));
  c = Resolve({"--config=/nonexistent/config"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ConnectionTest, ConnectGivesTheResolvedClientOrSaysWhyNot) {
  env_["HOME"] = "/nonexistent";
  EXPECT_EQ(ConnectWith({}), nullptr);
  EXPECT_THAT(err_.str(), HasSubstr("lockstep test: "));
  EXPECT_THAT(err_.str(), HasSubstr("--tls_ca"));

  err_.str("");
  auto client = ConnectWith({"--coordinator=coord:7001", "--tls_ca=" + ca_, "--token=t"});
  ASSERT_NE(client, nullptr) << err_.str();
  EXPECT_EQ(client->address(), "coord:7001");
  EXPECT_EQ(err_.str(), "");

  // --insecure works, and says what it costs.
  client = ConnectWith({"--insecure", "--coordinator=coord:7002"});
  ASSERT_NE(client, nullptr) << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("warning: --insecure: plaintext to coord:7002"));

  err_.str("");
  EXPECT_EQ(ConnectWith({"--insecure", "--coordinator=no-port"}), nullptr);
  EXPECT_THAT(err_.str(), HasSubstr("lockstep test: "));
}

}  // namespace
}  // namespace cli
}  // namespace lockstep

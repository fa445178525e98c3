#include "coordinator/token_table.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

TEST(TokenTableTest, FindsBearerTokens) {
  auto t = TokenTable::Parse(
      "# tokens\n"
      "0123456789abcdef0123 viewer val\n"
      "\n"
      "  fedcba9876543210fedc   operator   olga  \n",
      "tokens");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 2u);
  auto p = t->FindBearer("Bearer 0123456789abcdef0123");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->role, Role::kViewer);
  EXPECT_EQ(p->name, "val");
  p = t->FindBearer("Bearer fedcba9876543210fedc");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->role, Role::kOperator);
  EXPECT_FALSE(t->FindBearer("Bearer nope").has_value());
  EXPECT_FALSE(t->FindBearer("Basic 0123456789abcdef0123").has_value());
  EXPECT_FALSE(t->FindBearer("").has_value());
}

TEST(TokenTableTest, RefusesBadLinesNamingThem) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"0123456789abcdef0123 viewer\n", "line 1: expected `<token> <role> <name>`"},
      {"\n0123456789abcdef0123 admin bob\n", "line 2: role \"admin\""},
      {"short viewer bob\n", "shorter than 16"},
      {"0123456789abcdef0123 viewer a\n0123456789abcdef0123 operator b\n", "listed twice"},
      {"0123456789abcdef0123 worker w\n", "role \"worker\""},
  };
  for (const Case& c : cases) {
    auto t = TokenTable::Parse(c.text, "tokens");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(t.status().message(), HasSubstr(c.error)) << c.text;
  }
  EXPECT_EQ(TokenTable::Load("/nonexistent/tokens").status().code(), absl::StatusCode::kNotFound);
}

TEST(TokenTableTest, LoadRefusesATokensFileOthersCanRead) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/tokens";
  std::ofstream(path) << "0123456789abcdef0123 operator ops\n";
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto open = TokenTable::Load(path);
  EXPECT_EQ(open.status().code(), absl::StatusCode::kPermissionDenied) << open.status();
  EXPECT_THAT(open.status().message(), HasSubstr("--tokens_file: " + path));
  EXPECT_THAT(open.status().message(), HasSubstr("chmod 600 " + path));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto loaded = TokenTable::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->size(), 1u);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep

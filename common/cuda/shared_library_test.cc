#include "common/cuda/shared_library.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

TEST(SharedLibraryTest, MissingLibrarySaysWhatToSet) {
  absl::StatusOr<std::unique_ptr<SharedLibrary>> lib =
      SharedLibrary::Open("liblockstep_missing.so.7", "NCCL collectives");
  ASSERT_EQ(lib.status().code(), absl::StatusCode::kNotFound) << lib.status();
  const std::string m(lib.status().message());
  EXPECT_THAT(m, HasSubstr("liblockstep_missing.so.7 not found (needed for NCCL collectives)"));
  EXPECT_THAT(m, HasSubstr("set LD_LIBRARY_PATH"));
}

TEST(SharedLibraryTest, ResolvesFunctions) {
  absl::StatusOr<std::unique_ptr<SharedLibrary>> lib = SharedLibrary::Open("libm.so.6", "a test");
  ASSERT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<double (*)(double)> cosine = (*lib)->Function<double(double)>("cos");
  ASSERT_TRUE(cosine.ok()) << cosine.status();
  EXPECT_EQ((*cosine)(0.0), 1.0);
}

TEST(SharedLibraryTest, MissingSymbolNamesSymbolAndLibrary) {
  absl::StatusOr<std::unique_ptr<SharedLibrary>> lib = SharedLibrary::Open("libm.so.6", "a test");
  ASSERT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<void*> p = (*lib)->Symbol("ncclCommInitRankConfig");
  ASSERT_EQ(p.status().code(), absl::StatusCode::kNotFound) << p.status();
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("libm.so.6 has no symbol ncclCommInitRankConfig"));
}

}  // namespace
}  // namespace lockstep

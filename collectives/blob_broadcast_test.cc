#include "collectives/blob_broadcast.h"

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "collectives/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

using ::testing::HasSubstr;

BlobOptions Options(int64_t max_bytes) {
  BlobOptions o;
  o.secret = "test-secret";
  o.label = "checkpoint of step 7";
  o.max_bytes = max_bytes;
  o.bound_name = "the test's bound";
  return o;
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + 7);
  return s;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

// The header a dishonest root broadcasts by hand, as 8 words.
std::array<int64_t, 8> Words(const std::string& header) {
  std::array<int64_t, 8> w{};
  std::memcpy(w.data(), header.data(), header.size());
  return w;
}

class BlobBroadcastTest : public ::testing::TestWithParam<TransportKind> {};

// Lengths around the 8-byte word the payload travels in: none, 1, a word less one, a word,
// a word and a bit, and large with a ragged tail.
TEST_P(BlobBroadcastTest, EveryRankGetsTheRootsBytesOfAnySize) {
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{5}, size_t{7}, size_t{8}, size_t{9}, size_t{(1 << 20) + 3}}) {
    auto group = MakeGroup(GetParam(), 3);
    ASSERT_TRUE(group.ok()) << group.status();
    std::vector<std::string> got(3);
    std::vector<absl::Status> status(3);
    RunRanks(3, [&](int r) {
      got[r] = r == 1 ? Pattern(n) : "stale";
      status[r] = BroadcastBlob(*(*group)[r], &got[r], 1, Options(n), Soon());
    });
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(status[r].ok()) << "rank " << r << " n " << n << ": " << status[r];
      EXPECT_EQ(got[r], Pattern(n)) << "rank " << r << " n " << n;
    }
  }
}

TEST_P(BlobBroadcastTest, TheEndMarkerTravelsAuthenticated) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::optional<std::string>> got = {std::nullopt, std::string("stale")};
  std::vector<absl::Status> status(2);
  RunRanks(2,
           [&](int r) { status[r] = BroadcastBlob(*(*group)[r], &got[r], 0, Options(8), Soon()); });
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[1].ok()) << status[1];
  EXPECT_FALSE(got[1].has_value());
}

// A peer announcing a length no checkpoint of the job can have (2^62 bytes) is refused from
// the header, naming it: nothing is allocated (allocating it would abort the test).
TEST_P(BlobBroadcastTest, AHugeAnnouncedLengthIsRefusedBeforeAllocating) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_TRUE(group.ok()) << group.status();
  const BlobOptions options = Options(1 << 20);
  std::string header = EncodeBlobHeader(options, 0, "x");
  const int64_t huge = int64_t{1} << 62;
  std::memcpy(header.data() + 8, &huge, sizeof(huge));
  absl::Status received;
  RunRanks(2, [&](int r) {
    if (r == 0) {
      std::array<int64_t, 8> words = Words(header);
      ASSERT_TRUE((*group)[0]->Broadcast(words.data(), 8, DType::kI64, 0, Soon()).ok());
      return;  // a dishonest root sends no payload
    }
    std::string bytes;
    received = BroadcastBlob(*(*group)[1], &bytes, 0, options, Soon());
  });
  EXPECT_EQ(received.code(), absl::StatusCode::kResourceExhausted) << received;
  EXPECT_THAT(received.message(), HasSubstr("rank 0 announced checkpoint of step 7 of "
                                            "4611686018427387904 bytes"));
  EXPECT_THAT(received.message(), HasSubstr("the test's bound of 1048576 bytes"));
}

// The root's header proves bytes that are not the ones that arrive: refused, naming it.
TEST_P(BlobBroadcastTest, ATamperedPayloadIsRefusedNamingTheRoot) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_TRUE(group.ok()) << group.status();
  const BlobOptions options = Options(1 << 20);
  const std::string honest = Pattern(1001);  // a padded tail too
  std::string tampered = honest;
  tampered[517] ^= 0x10;
  tampered.resize((1001 + 7) / 8 * 8, '\0');
  absl::Status received;
  std::string bytes = "stale";
  RunRanks(2, [&](int r) {
    if (r == 0) {
      std::array<int64_t, 8> words = Words(EncodeBlobHeader(options, 0, honest));
      ASSERT_TRUE((*group)[0]->Broadcast(words.data(), 8, DType::kI64, 0, Soon()).ok());
      ASSERT_TRUE((*group)[0]
                      ->Broadcast(tampered.data(), tampered.size() / 8, DType::kI64, 0, Soon())
                      .ok());
      return;
    }
    received = BroadcastBlob(*(*group)[1], &bytes, 0, options, Soon());
  });
  EXPECT_EQ(received.code(), absl::StatusCode::kDataLoss) << received;
  EXPECT_THAT(received.message(), HasSubstr("from rank 0 failed authentication"));
  EXPECT_TRUE(bytes.empty()) << "refused bytes are not handed on";
}

TEST_P(BlobBroadcastTest, AnotherSecretOrLabelIsRefused) {
  for (bool other_secret : {true, false}) {
    auto group = MakeGroup(GetParam(), 2);
    ASSERT_TRUE(group.ok()) << group.status();
    std::vector<absl::Status> status(2);
    RunRanks(2, [&](int r) {
      BlobOptions o = Options(64);
      if (r == 1) (other_secret ? o.secret : o.label) = "something else";
      std::string bytes = r == 0 ? Pattern(40) : "";
      status[r] = BroadcastBlob(*(*group)[r], &bytes, 0, o, Soon());
    });
    EXPECT_TRUE(status[0].ok()) << status[0];
    EXPECT_EQ(status[1].code(), absl::StatusCode::kDataLoss) << status[1];
  }
}

TEST_P(BlobBroadcastTest, ARootOverTheBoundFailsWithItsReceivers) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<absl::Status> status(2);
  std::vector<std::string> bytes = {Pattern(65), ""};
  RunRanks(2, [&](int r) {
    status[r] = BroadcastBlob(*(*group)[r], &bytes[r], 0, Options(64), Soon());
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kResourceExhausted) << status[r];
    EXPECT_THAT(status[r].message(), HasSubstr("rank 0 announced"));
  }
  EXPECT_EQ(bytes[0], Pattern(65)) << "the root keeps its bytes";
}

// The root sends its header, then goes away before the payload: its communicator destroyed,
// so its sockets close as a killed process's do (the kernel closes them the same way). TCP
// only: an in-process group has no process to lose. The receiver, waiting for the payload,
// fails fast with the peer's failure, never at its deadline, and hands on nothing.
TEST(BlobBroadcastTcpTest, ARootThatDiesMidBroadcastFailsItsReceiverFast) {
  auto group = MakeGroup(TransportKind::kTcp, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  const BlobOptions options = Options(1 << 20);
  const std::string payload = Pattern(4096);
  absl::Status received;
  std::string bytes = "stale";
  absl::Duration took;
  RunRanks(2, [&](int r) {
    if (r == 0) {
      std::array<int64_t, 8> words = Words(EncodeBlobHeader(options, 0, payload));
      ASSERT_TRUE((*group)[0]->Broadcast(words.data(), 8, DType::kI64, 0, Soon()).ok());
      (*group)[0].reset();  // gone before the payload
      return;
    }
    const absl::Time start = absl::Now();
    received = BroadcastBlob(*(*group)[1], &bytes, 0, options, Soon());
    took = absl::Now() - start;
  });
  EXPECT_FALSE(received.ok());
  EXPECT_NE(received.code(), absl::StatusCode::kDeadlineExceeded) << received;
  EXPECT_LT(took, kFailFastBound) << received;
  EXPECT_NE(bytes, payload);
}

INSTANTIATE_TEST_SUITE_P(Transports, BlobBroadcastTest,
                         ::testing::Values(TransportKind::kInProc, TransportKind::kTcp));

TEST(BlobHeaderTest, ParsesOnlyWholeHeadersOfTheExpectedRoot) {
  const BlobOptions options = Options(100);
  const std::string header = EncodeBlobHeader(options, 2, "payload");
  auto length = ParseBlobHeader(header, options, 2);
  ASSERT_TRUE(length.ok()) << length.status();
  EXPECT_EQ(*length, 7);
  EXPECT_TRUE(VerifyBlob(header, "payload", options, 2).ok());
  EXPECT_EQ(ParseBlobHeader(header.substr(1), options, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBlobHeader(header, options, 1).status().code(), absl::StatusCode::kDataLoss);
  std::string bad_magic = header;
  bad_magic[0] ^= 1;
  EXPECT_EQ(ParseBlobHeader(bad_magic, options, 2).status().code(), absl::StatusCode::kDataLoss);
  std::string negative = header;
  const int64_t minus_two = -2;
  std::memcpy(negative.data() + 8, &minus_two, 8);
  EXPECT_EQ(ParseBlobHeader(negative, options, 2).status().code(), absl::StatusCode::kDataLoss);
  // The MAC covers the length: a header whose length was changed fails verification.
  EXPECT_EQ(VerifyBlob(header, "payloa", options, 2).code(), absl::StatusCode::kDataLoss);
  const std::string end = EncodeBlobHeader(options, 2, std::nullopt);
  EXPECT_EQ(*ParseBlobHeader(end, options, 2), kBlobEnd);
  EXPECT_TRUE(VerifyBlob(end, std::nullopt, options, 2).ok());
  EXPECT_EQ(VerifyBlob(end, "", options, 2).code(), absl::StatusCode::kDataLoss);
}

// The wire format as the header comment gives it, computed independently (Python's hmac):
// fuzz/make_seeds.py builds its seeds the same way.
TEST(BlobHeaderTest, TheMacIsTheDocumentedHmac) {
  BlobOptions o;
  o.secret = "secret";
  o.label = "the checkpoint of step 7 for jobs/j/0";
  o.max_bytes = 3;
  const std::string header = EncodeBlobHeader(o, 1, "abc");
  EXPECT_EQ(absl::BytesToHexString(header.substr(32)),
            "4d34604e8b40080b7b4339a6ef95b94c9d562b446b82243decdf79fa280210bc");
  EXPECT_EQ(header.substr(0, 8), "LSBLOB01");
}

TEST(BlobHeaderTest, BadArgumentsAreRefusedBeforeAnythingIsSent) {
  auto group = MakeGroup(TransportKind::kInProc, 1);
  ASSERT_TRUE(group.ok()) << group.status();
  std::string bytes = "x";
  EXPECT_EQ(BroadcastBlob(*(*group)[0], &bytes, 1, Options(8), Soon()).code(),
            absl::StatusCode::kInvalidArgument);
  BlobOptions no_secret = Options(8);
  no_secret.secret.clear();
  EXPECT_EQ(BroadcastBlob(*(*group)[0], &bytes, 0, no_secret, Soon()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

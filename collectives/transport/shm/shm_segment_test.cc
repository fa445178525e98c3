#include "collectives/transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace shm {
namespace {

using ::testing::HasSubstr;

// Unlinks a test's segment name whatever the test's outcome.
struct Unlinked {
  explicit Unlinked(std::string n) : name(std::move(n)) {}
  ~Unlinked() { shm_unlink(name.c_str()); }
  std::string name;
};

TEST(ShmSegmentTest, NamesAreUniquePerCallAndStartWithTheProjectsPrefix) {
  const std::string a = NewSegmentName("job/1", 0);
  const std::string b = NewSegmentName("job/1", 0);
  EXPECT_NE(a, b);  // 64 random bits each
  EXPECT_EQ(a.rfind("/lockstep-", 0), 0u) << a;
  EXPECT_THAT(a, HasSubstr("-r0-p"));
  EXPECT_NE(NewSegmentName("job/1", 3).find("-r3-"), std::string::npos);
}

TEST(ShmSegmentTest, APeerSeesWhatTheOwnerWrote) {
  Unlinked seg(NewSegmentName("segment-test", 0));
  auto own = CreateSegment(seg.name, 8192, 0);
  ASSERT_TRUE(own.ok()) << own.status();
  std::memcpy(*own, "hello", 6);
  auto peer = MapPeerSegment(seg.name, 8192);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_STREQ(static_cast<const char*>(*peer), "hello");
  munmap(*peer, 8192);
  munmap(*own, 8192);
}

TEST(ShmSegmentTest, ANameTakenAlreadyIsRefused) {
  Unlinked seg(NewSegmentName("segment-test", 1));
  auto first = CreateSegment(seg.name, 4096, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = CreateSegment(seg.name, 4096, 1);  // O_EXCL: someone made it first
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr(seg.name));
  munmap(*first, 4096);
}

TEST(ShmSegmentTest, APeerSegmentOfAnotherSizeIsNotMapped) {
  Unlinked seg(NewSegmentName("segment-test", 2));
  auto own = CreateSegment(seg.name, 4096, 2);
  ASSERT_TRUE(own.ok()) << own.status();
  auto peer = MapPeerSegment(seg.name, 1 << 20);
  EXPECT_TRUE(absl::IsFailedPrecondition(peer.status())) << peer.status();
  EXPECT_THAT(peer.status().message(), HasSubstr("advertised as 1048576 bytes but holds 4096"));
  munmap(*own, 4096);
}

TEST(ShmSegmentTest, AMissingPeerSegmentIsUnavailable) {
  auto peer = MapPeerSegment("/lockstep-no-such-segment-for-this-test", 4096);
  EXPECT_TRUE(absl::IsUnavailable(peer.status())) << peer.status();
  EXPECT_THAT(peer.status().message(), HasSubstr("check /dev/shm"));
}

TEST(ShmSegmentTest, AReservationDevShmCannotHoldFailsClearlyAndLeavesNothing) {
  const std::string name = NewSegmentName("segment-test", 3);
  Unlinked seg(name);
  auto own = CreateSegment(name, size_t{1} << 50, 3);  // a petabyte
  ASSERT_TRUE(absl::IsResourceExhausted(own.status())) << own.status();
  EXPECT_THAT(own.status().message(), HasSubstr("rank 3: reserving"));
  EXPECT_THAT(own.status().message(), HasSubstr("--shm-size"));
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  EXPECT_LT(fd, 0) << "the failed segment was left in /dev/shm";
  if (fd >= 0) close(fd);
}

TEST(ShmSegmentTest, OwnSegmentHandsOutItsHeap) {
  Unlinked seg(NewSegmentName("segment-test", 4));
  auto base = CreateSegment(seg.name, 128 << 10, 4);
  ASSERT_TRUE(base.ok()) << base.status();
  OwnSegment own(*base, 128 << 10, 64 << 10, 64 << 10);
  EXPECT_EQ(own.heap().bytes(), size_t{64} << 10);
  void* p = own.Allocate(1024);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(own.heap().Contains(p, 1024));
  EXPECT_GE(static_cast<char*>(p), static_cast<char*>(*base) + (64 << 10));
  own.Free(p);
}

}  // namespace
}  // namespace shm
}  // namespace collectives
}  // namespace lockstep

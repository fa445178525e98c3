#include "collectives/transport/shm/shm_negotiation.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(ShmNegotiationTest, AdvertGivesNameAndBytes) {
  absl::StatusOr<SegmentAdvert> advert = ParseSegmentAdvert("/lockstep-ab-r1 8192", 1, 4096);
  ASSERT_TRUE(advert.ok()) << advert.status();
  EXPECT_EQ(advert->name, "/lockstep-ab-r1");
  EXPECT_EQ(advert->bytes, 8192u);
}

TEST(ShmNegotiationTest, MalformedAdvertIsRefusedNamingRankAndValue) {
  for (const char* value : {"", "/seg", "/seg 8192 x", "/seg  8192", "/seg -1", "/seg 12x",
                            "/seg 4095", "/seg 99999999999999999999999"}) {
    absl::Status s = ParseSegmentAdvert(value, 3, 4096).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << value;
    EXPECT_NE(s.message().find("rank 3"), std::string::npos) << s;
    EXPECT_NE(s.message().find(value), std::string::npos) << s;
  }
}

TEST(ShmNegotiationTest, CapabilityFieldFindsTheFirstMatchingKey) {
  EXPECT_EQ(CapabilityField("cma=0;direct=off", "cma"), "0");
  EXPECT_EQ(CapabilityField("cma=0;direct=off", "direct"), "off");
  EXPECT_EQ(CapabilityField("direct=65536;cma=4096;cma=1", "cma"), "4096");
  EXPECT_EQ(CapabilityField("cma=", "cma"), "");
  EXPECT_EQ(CapabilityField("cma=a=b", "cma"), "a=b");
}

TEST(ShmNegotiationTest, AbsentOrPartialKeysGiveEmpty) {
  EXPECT_EQ(CapabilityField("", "cma"), "");
  EXPECT_EQ(CapabilityField("cma", "cma"), "");
  EXPECT_EQ(CapabilityField("xcma=1;direct=2", "cma"), "");
  EXPECT_EQ(CapabilityField(";;;", "direct"), "");
  // A key that is a prefix of another does not match it.
  EXPECT_EQ(CapabilityField("cmax=1", "cma"), "");
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

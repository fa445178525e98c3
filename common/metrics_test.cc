#include "common/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/http_get.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

TEST(MetricsRegistryTest, SeriesAppearInTextFormat) {
  MetricsRegistry m;
  Counter c = m.AddCounter("lockstep_test_total", "A test counter.", {{"kind", "a"}});
  c.Increment();
  c.Increment(2);
  m.AddGauge("lockstep_test_gauge", "A test gauge.").Set(7);
  Histogram h = m.AddHistogram("lockstep_test_seconds", "A test histogram.", {0.1, 1});
  h.Observe(0.5);
  const std::string text = m.TextFormat();
  EXPECT_THAT(text, HasSubstr("lockstep_test_total{kind=\"a\"} 3"));
  EXPECT_THAT(text, HasSubstr("lockstep_test_gauge 7"));
  EXPECT_THAT(text, HasSubstr("lockstep_test_seconds_bucket{le=\"0.1\"} 0"));
  EXPECT_THAT(text, HasSubstr("lockstep_test_seconds_bucket{le=\"1\"} 1"));
  EXPECT_THAT(text, HasSubstr("lockstep_test_seconds_count 1"));
}

TEST(MetricsRegistryTest, SameNameAndLabelsIsTheSameSeries) {
  MetricsRegistry m;
  m.AddCounter("lockstep_twice_total", "Twice.").Increment();
  m.AddCounter("lockstep_twice_total", "Twice.").Increment();
  EXPECT_THAT(m.TextFormat(), HasSubstr("lockstep_twice_total 2"));
}

TEST(MetricsRegistryTest, RefusedNameCountsNothingAndDoesNotThrow) {
  MetricsRegistry m;
  Counter bad = m.AddCounter("not a name", "Refused.");
  bad.Increment();  // a no-op
  m.AddCounter("lockstep_kind_total", "A counter.");
  Gauge clash = m.AddGauge("lockstep_kind_total", "Same name, another kind.");
  clash.Set(1);  // a no-op
  EXPECT_THAT(m.TextFormat(), Not(HasSubstr("not a name")));
  Counter none;
  none.Increment();  // default-constructed handles are no-ops too
}

TEST(MetricsRegistryTest, OnCollectRunsBeforeEveryScrape) {
  MetricsRegistry m;
  Gauge g = m.AddGauge("lockstep_refreshed", "Set at scrape time.");
  int calls = 0;
  const int id = m.OnCollect([&] { g.Set(++calls); });
  EXPECT_THAT(m.TextFormat(), HasSubstr("lockstep_refreshed 1"));
  EXPECT_THAT(m.TextFormat(), HasSubstr("lockstep_refreshed 2"));
  m.RemoveOnCollect(id);
  EXPECT_THAT(m.TextFormat(), HasSubstr("lockstep_refreshed 2"));
  EXPECT_EQ(calls, 2);
}

TEST(MetricsRegistryTest, ServesMetricsOverHttpOnAnyFreePort) {
  MetricsRegistry m;
  m.AddCounter("lockstep_served_total", "Served.").Increment(5);
  int scrapes = 0;
  m.OnCollect([&] { ++scrapes; });
  ASSERT_TRUE(m.Serve("127.0.0.1:0").ok());
  ASSERT_GT(m.port(), 0);
  absl::StatusOr<std::string> body = HttpGet("127.0.0.1", m.port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_THAT(*body, HasSubstr("lockstep_served_total 5"));
  EXPECT_EQ(scrapes, 1);
  // Nothing but /metrics.
  absl::StatusOr<std::string> other = HttpGet("127.0.0.1", m.port(), "/");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << other.status();
  EXPECT_THAT(std::string(other.status().message()), HasSubstr(" 404")) << other.status();
  EXPECT_EQ(m.Serve("127.0.0.1:0").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MetricsRegistryTest, BadOrBusyAddressIsAnError) {
  MetricsRegistry m;
  EXPECT_EQ(m.Serve("no-port").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Serve("127.0.0.1:99999").code(), absl::StatusCode::kInvalidArgument);
  MetricsRegistry first;
  ASSERT_TRUE(first.Serve("127.0.0.1:0").ok());
  absl::Status busy = m.Serve(absl::StrCat("127.0.0.1:", first.port()));
  EXPECT_EQ(busy.code(), absl::StatusCode::kUnavailable) << busy;
  EXPECT_THAT(std::string(busy.message()), HasSubstr("--metrics_address"));
}

TEST(MetricsRegistryTest, RemovedGaugeLeavesTheOutput) {
  MetricsRegistry m;
  Gauge a = m.AddGauge("lockstep_age_seconds", "Per task.", {{"task", "worker/0"}});
  m.AddGauge("lockstep_age_seconds", "Per task.", {{"task", "worker/1"}}).Set(2);
  a.Set(1);
  EXPECT_THAT(m.TextFormat(), HasSubstr("task=\"worker/0\""));
  m.Remove(a);
  m.Remove(Gauge());  // a no-op
  EXPECT_THAT(m.TextFormat(), Not(HasSubstr("task=\"worker/0\"")));
  EXPECT_THAT(m.TextFormat(), HasSubstr("lockstep_age_seconds{task=\"worker/1\"} 2"));
}

TEST(ExponentialBucketsTest, MultipliesFromStart) {
  EXPECT_THAT(ExponentialBuckets(1, 2, 4), ::testing::ElementsAre(1, 2, 4, 8));
}

}  // namespace
}  // namespace lockstep

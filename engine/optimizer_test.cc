// The optimizer tests (optimizer_test_body.h) on "/cpu:0" and on the fake "/gpu:0" (FakeCudaApi,
// the grid emulator, FakeBlasApi), plus the learning-rate schedules, which are host arithmetic
// with no device to run on.
#include "engine/learning_rate.h"
#include "engine/optimizer_test_body.h"

namespace lockstep::engine {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceGenericTest);

using Devices = ::testing::Types<BitwiseCpu, BitwiseFakeGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Device, OptimizerTest, Devices);

namespace {

TEST(LearningRate, Schedules) {
  v1::LearningRate step;
  step.mutable_step_decay()->set_initial(1.0);
  step.mutable_step_decay()->set_decay_rate(0.5);
  step.mutable_step_decay()->set_decay_steps(10);
  auto s = *LearningRateSchedule::Create(step);
  EXPECT_DOUBLE_EQ(s.At(9), 1.0);
  EXPECT_DOUBLE_EQ(s.At(10), 0.5);
  EXPECT_DOUBLE_EQ(s.At(25), 0.25);

  v1::LearningRate wc;
  auto* w = wc.mutable_warmup_cosine();
  w->set_peak(1.0);
  w->set_warmup_steps(4);
  w->set_decay_steps(10);
  w->set_final_fraction(0.1);
  auto c = *LearningRateSchedule::Create(wc);
  EXPECT_DOUBLE_EQ(c.At(0), 0.25);
  EXPECT_DOUBLE_EQ(c.At(3), 1.0);
  EXPECT_DOUBLE_EQ(c.At(4), 1.0);
  EXPECT_NEAR(c.At(9), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(c.At(14), 0.1, 1e-12);
  EXPECT_NEAR(c.At(1000), 0.1, 1e-12);

  w->set_decay_steps(0);
  EXPECT_NE(LearningRateSchedule::Create(wc).status().message().find("warmup_cosine.decay_steps"),
            std::string::npos);
}

}  // namespace
}  // namespace lockstep::engine

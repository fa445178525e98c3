#include "worker/gpu/gpu_selection.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::HasSubstr;

std::vector<GpuInfo> TwoH100s() {
  std::vector<GpuInfo> v(2);
  for (int i = 0; i < 2; ++i) {
    v[i].ordinal = i;
    v[i].product = "NVIDIA H100 80GB HBM3";
    v[i].memory_bytes = int64_t{80} << 30;
    v[i].compute_major = 9;
    v[i].compute_minor = 0;
    v[i].pci_bus_id = i == 0 ? "0000:18:00.0" : "0000:2A:00.0";
  }
  return v;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ParseGpuFlagTest, AllNoneAndLists) {
  auto empty = ParseGpuFlag("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->mode, GpuRequest::Mode::kAll);
  EXPECT_FALSE(empty->explicit_flag);
  auto all = ParseGpuFlag("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->mode, GpuRequest::Mode::kAll);
  EXPECT_TRUE(all->explicit_flag);
  EXPECT_EQ(ParseGpuFlag("none")->mode, GpuRequest::Mode::kNone);
  auto list = ParseGpuFlag("1, 0");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->mode, GpuRequest::Mode::kList);
  EXPECT_EQ(list->ordinals, (std::vector<int>{1, 0}));
}

TEST(ParseGpuFlagTest, RefusesWordsNegativesAndRepeats) {
  EXPECT_THAT(Message(ParseGpuFlag("0,x").status()), HasSubstr("\"x\" is not a GPU number"));
  EXPECT_THAT(Message(ParseGpuFlag("-1").status()), HasSubstr("\"-1\" is not a GPU number"));
  EXPECT_THAT(Message(ParseGpuFlag("0,").status()), HasSubstr("\"\" is not a GPU number"));
  absl::Status twice = ParseGpuFlag("1,1").status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(twice), HasSubstr("GPU 1 is listed twice"));
}

TEST(SelectGpusTest, AllNoneAndList) {
  auto all = SelectGpus(*ParseGpuFlag(""), TwoH100s(), false, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  EXPECT_TRUE(SelectGpus(*ParseGpuFlag("none"), TwoH100s(), false, "")->empty());
  auto one = SelectGpus(*ParseGpuFlag("1"), TwoH100s(), false, "");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].pci_bus_id, "0000:2A:00.0");
}

TEST(SelectGpusTest, NoGpuIsFineUnlessAskedFor) {
  EXPECT_TRUE(SelectGpus(*ParseGpuFlag(""), {}, false, "")->empty());
  absl::Status asked = SelectGpus(*ParseGpuFlag("all"), {}, true, "-1").status();
  EXPECT_EQ(asked.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(asked), HasSubstr("shows no GPU (CUDA_VISIBLE_DEVICES=\"-1\")"));
}

TEST(SelectGpusTest, MissingGpuListsTheVisibleOnes) {
  absl::Status s = SelectGpus(*ParseGpuFlag("0,2"), TwoH100s(), true, "4,5").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(s), HasSubstr("GPU 2 does not exist"));
  EXPECT_THAT(Message(s), HasSubstr("2 GPU(s): 0 NVIDIA H100 80GB HBM3 (sm_90, 0000:18:00.0)"));
  EXPECT_THAT(Message(s), HasSubstr("CUDA_VISIBLE_DEVICES=\"4,5\""));
  absl::Status none = SelectGpus(*ParseGpuFlag("0"), {}, false, "").status();
  EXPECT_THAT(Message(none), HasSubstr("shows no GPU (CUDA_VISIBLE_DEVICES is not set"));
}

TEST(OfferedGpusTest, WithoutTheFlagAFailedProbeMeansNoGpu) {
  std::string warning;
  auto cpu_build =
      OfferedGpus("", absl::UnimplementedError("built without CUDA"), nullptr, &warning);
  ASSERT_TRUE(cpu_build.ok());
  EXPECT_TRUE(cpu_build->empty());
  EXPECT_EQ(warning, "");
  auto no_driver = OfferedGpus("", absl::UnavailableError("no NVIDIA driver"), nullptr, &warning);
  ASSERT_TRUE(no_driver.ok());
  EXPECT_TRUE(no_driver->empty());
  EXPECT_EQ(warning, "no GPU used: no NVIDIA driver");
}

TEST(OfferedGpusTest, WithTheFlagAFailedProbeIsTheError) {
  std::string warning;
  absl::Status s =
      OfferedGpus("0,1", absl::UnimplementedError("built without CUDA"), nullptr, &warning)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Message(s), "--gpus: built without CUDA");
  EXPECT_EQ(OfferedGpus("all", absl::UnavailableError("x"), nullptr, &warning).status().code(),
            absl::StatusCode::kUnavailable);
  // none never needs the probe.
  auto none = OfferedGpus("none", absl::UnavailableError("x"), nullptr, &warning);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(OfferedGpusTest, SelectsAmongTheProbedGpus) {
  std::string warning;
  auto one = OfferedGpus("1", TwoH100s(), "3,7", &warning);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].ordinal, 1);
  absl::Status missing = OfferedGpus("5", TwoH100s(), "3,7", &warning).status();
  EXPECT_THAT(Message(missing), HasSubstr("CUDA_VISIBLE_DEVICES=\"3,7\""));
  EXPECT_EQ(OfferedGpus("x", TwoH100s(), nullptr, &warning).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GpuDevicesTest, RegistersOneDevicePerSelectedGpu) {
  std::vector<GpuInfo> gpus = {TwoH100s()[1]};
  std::vector<v1::Device> d = GpuDevices(gpus);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind(), v1::Device::GPU);
  EXPECT_EQ(d[0].index(), 0);  // the worker's /gpu:0, whatever its CUDA number
  EXPECT_EQ(d[0].name(), "GPU:0");
  EXPECT_EQ(d[0].memory_bytes(), int64_t{80} << 30);
  EXPECT_EQ(d[0].product(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d[0].compute_capability(), "9.0");
  EXPECT_EQ(d[0].pci_bus_id(), "0000:2A:00.0");
}

}  // namespace
}  // namespace lockstep::worker

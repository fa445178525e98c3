#include "export/safetensors.h"

#include <cstring>

#include "export/test_tensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::exporting {
namespace {

using ::testing::HasSubstr;

Weights Sample() {
  Weights w;
  w.tensors.push_back(TestTensor("dense/kernel", v1::F32, {2, 3}, 24));
  w.tensors.push_back(TestTensor("dense/bias", v1::F32, {3}, 12));
  w.tensors.push_back(TestTensor("step", v1::I64, {}, 8));
  w.tensors.push_back(TestTensor("empty", v1::BF16, {0, 4}, 0));
  w.tensors.push_back(TestTensor("half", v1::F16, {1}, 2));
  w.metadata["job_id"] = "digits";
  w.metadata["step"] = "42";
  return w;
}

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  return n;
}

TEST(Safetensors, LayoutFollowsTheFormat) {
  auto bytes = EncodeSafetensors(Sample());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const uint64_t n = HeaderLength(*bytes);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data buffer starts 8-byte aligned";
  ASSERT_EQ(bytes->size(), 8 + n + 24 + 12 + 8 + 0 + 2);
  const std::string header = bytes->substr(8, n);
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}')) << "padded with spaces only";
  nlohmann::json j = nlohmann::json::parse(header);
  EXPECT_EQ(j["dense/kernel"]["dtype"], "F32");
  EXPECT_EQ(j["dense/kernel"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(j["dense/kernel"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(j["dense/bias"]["data_offsets"], nlohmann::json({24, 36}));
  EXPECT_EQ(j["step"]["shape"], nlohmann::json::array());
  EXPECT_EQ(j["step"]["dtype"], "I64");
  EXPECT_EQ(j["empty"]["data_offsets"], nlohmann::json({44, 44}));
  EXPECT_EQ(j["__metadata__"]["job_id"], "digits");
  EXPECT_EQ(bytes->substr(8 + n, 24), Sample().tensors[0].tensor().content());
}

TEST(Safetensors, RoundTripsBitwise) {
  const Weights in = Sample();
  auto bytes = EncodeSafetensors(in);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto out = DecodeSafetensors(*bytes);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->tensors.size(), in.tensors.size());
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    SCOPED_TRACE(in.tensors[i].name());
    EXPECT_EQ(out->tensors[i].name(), in.tensors[i].name());
    EXPECT_EQ(out->tensors[i].tensor().dtype(), in.tensors[i].tensor().dtype());
    EXPECT_THAT(out->tensors[i].tensor().shape().dims(),
                ::testing::ElementsAreArray(in.tensors[i].tensor().shape().dims()));
    EXPECT_EQ(out->tensors[i].tensor().content(), in.tensors[i].tensor().content());
  }
  EXPECT_EQ(out->metadata, in.metadata);
}

// Rewrites the header of a valid file with `edit` applied to its JSON (the data unchanged).
std::string WithHeader(const std::function<void(nlohmann::json&)>& edit) {
  const std::string bytes = EncodeSafetensors(Sample()).value();
  const uint64_t n = HeaderLength(bytes);
  nlohmann::json j = nlohmann::json::parse(bytes.substr(8, n));
  edit(j);
  const std::string header = j.dump();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + bytes.substr(8 + n);
}

TEST(Safetensors, BadFilesAreRefusedSayingWhere) {
  auto message = [](const std::string& bytes) {
    absl::Status s = DecodeSafetensors(bytes).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_THAT(message("abc"), HasSubstr("shorter than the 8-byte header length"));
  EXPECT_THAT(message(std::string("\xff\0\0\0\0\0\0\0{}", 10)), HasSubstr("runs past the end"));
  EXPECT_THAT(message(std::string("\x02\0\0\0\0\0\0\0[]", 10)), HasSubstr("not a JSON object"));
  EXPECT_THAT(message(WithHeader([](nlohmann::json& j) { j["dense/bias"]["dtype"] = "Q8"; })),
              HasSubstr("tensor \"dense/bias\": dtype \"Q8\" is not one of"));
  EXPECT_THAT(message(WithHeader([](nlohmann::json& j) { j["dense/bias"].erase("shape"); })),
              HasSubstr("tensor \"dense/bias\": no \"shape\""));
  EXPECT_THAT(message(WithHeader([](nlohmann::json& j) { j["dense/bias"]["shape"] = {4}; })),
              HasSubstr("tensor \"dense/bias\": data_offsets [24,36] do not span its shape [4]"));
  EXPECT_THAT(message(WithHeader([](nlohmann::json& j) {
                j["dense/bias"]["data_offsets"] = {20, 32};
              })),
              HasSubstr("leave a gap, overlap another tensor"));
  EXPECT_THAT(message(WithHeader([](nlohmann::json& j) { j.erase("half"); })),
              HasSubstr("the tensors cover 44 of the 46 bytes"));
  EXPECT_THAT(message(WithHeader([](nlohmann::json& j) { j["__metadata__"]["step"] = 42; })),
              HasSubstr("__metadata__.step is not a string"));
}

TEST(Safetensors, EncodeRefusesWhatItCannotWrite) {
  Weights w = Sample();
  w.tensors[1].mutable_tensor()->mutable_content()->append("x");
  EXPECT_THAT(std::string(EncodeSafetensors(w).status().message()),
              HasSubstr("dense/bias: holds 13 bytes"));
  w = Sample();
  w.tensors[1].set_name("__metadata__");
  EXPECT_THAT(std::string(EncodeSafetensors(w).status().message()), HasSubstr("is taken"));
}

TEST(Safetensors, ReadingAMissingFileNamesIt) {
  absl::Status s = ReadSafetensorsFile("/nonexistent/model.safetensors").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent/model.safetensors"));
}

}  // namespace
}  // namespace lockstep::exporting

#include "engine/tensor.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::HasSubstr;

TEST(Tensor, AlignedAndShaped) {
  Tensor t(DType::kF32, Shape{3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.num_elements(), 15);
  EXPECT_EQ(t.num_bytes(), 60u);
  EXPECT_EQ(t.DebugString(), "f32[3,5]");
  EXPECT_EQ(Tensor::Scalar<double>(2.5).shape().rank(), 0);
}

TEST(Tensor, CopiesAliasClonesDoNot) {
  Tensor a = Tensor::FromVector<float>({1, 2, 3, 4}, Shape{2, 2});
  Tensor alias = a;
  Tensor copy = a.Clone();
  a.data<float>()[0] = 9;
  EXPECT_EQ(alias.data<float>()[0], 9);
  EXPECT_EQ(copy.data<float>()[0], 1);
  auto r = a.Reshaped(Shape{4});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<float>(), a.data<float>());
  auto bad = a.Reshaped(Shape{3});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("element counts differ"));
}

TEST(Tensor, ProtoRoundTripForEveryDtype) {
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
    Tensor t(d, Shape{2, 3});
    for (size_t i = 0; i < t.num_bytes(); ++i) static_cast<char*>(t.raw_data())[i] = char(i * 7);
    auto back = Tensor::FromProto(t.ToProto());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(back->BitwiseEquals(t)) << DTypeName(d);
  }
  v1::NamedTensor named = Tensor::Scalar<int64_t>(5).ToNamedProto("optimizer/iterations");
  EXPECT_EQ(named.name(), "optimizer/iterations");
  EXPECT_EQ(named.tensor().dtype(), v1::I64);
}

TEST(Tensor, FromProtoRefusesBadContent) {
  v1::TensorProto p = Tensor::Zeros(DType::kF32, Shape{2}).ToProto();
  p.set_content("abc");
  auto t = Tensor::FromProto(p);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("needs 8 content bytes"), std::string::npos);
  p = Tensor::Zeros(DType::kF32, Shape{2}).ToProto();
  p.set_dtype(v1::DTYPE_UNSPECIFIED);
  t = Tensor::FromProto(p);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("is not one of F32, F64, F16, BF16, I32, I64"));
  p.set_dtype(v1::F32);
  p.mutable_shape()->set_dims(0, -2);
  t = Tensor::FromProto(p);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("has a negative dimension"));
}

// A corrupt checkpoint's shape is refused by its size alone: nothing is allocated for it and
// the element count never overflows.
TEST(Tensor, FromProtoRefusesHugeShapesBeforeAllocating) {
  v1::TensorProto p;
  p.set_dtype(v1::F32);
  p.mutable_shape()->add_dims(int64_t{1} << 20);
  p.mutable_shape()->add_dims(int64_t{1} << 20);
  auto t = Tensor::FromProto(p);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("needs 4398046511104 content bytes"), std::string::npos)
      << t.status();
  for (int64_t last : {int64_t{1} << 40, int64_t{0}}) {
    p.mutable_shape()->clear_dims();
    p.mutable_shape()->add_dims(int64_t{1} << 40);
    p.mutable_shape()->add_dims(int64_t{1} << 40);
    p.mutable_shape()->add_dims(last);
    t = Tensor::FromProto(p);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("more bytes than fit in 64 bits"), std::string::npos)
        << t.status();
  }
}

TEST(Device, ParsesNames) {
  EXPECT_EQ(Device::Parse("/cpu:3")->index(), 3);
  EXPECT_EQ(Device::Parse("GPU:1")->type(), Device::Type::kCuda);
  EXPECT_EQ(Device::Cpu(2).name(), "/cpu:2");
  auto tpu = Device::Parse("/tpu:0");
  EXPECT_EQ(tpu.status().code(), absl::StatusCode::kInvalidArgument) << tpu.status();
  EXPECT_THAT(std::string(tpu.status().message()),
              HasSubstr("is not of the form /cpu:N or /gpu:N"));
  auto negative = Device::Parse("/cpu:-1");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument) << negative.status();
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("has no valid index"));
}

}  // namespace
}  // namespace lockstep::engine

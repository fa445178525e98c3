#include "engine/op_registry.h"

#include "engine/ops/builtin_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

TEST(OpRegistry, BuiltinOpsCoverEveryOpType) {
  OpRegistry ops = BuiltinOps();
  const auto* desc = v1::OpType_descriptor();
  for (int i = 0; i < desc->value_count(); ++i) {
    auto op = static_cast<v1::OpType>(desc->value(i)->number());
    if (op == v1::OP_UNSPECIFIED) continue;
    const OpDef* def = ops.Find(op);
    ASSERT_NE(def, nullptr) << v1::OpType_Name(op);
    EXPECT_TRUE(def->shape != nullptr) << v1::OpType_Name(op);
    const bool source = op == v1::INPUT || op == v1::VARIABLE;
    EXPECT_EQ(def->kernels.count(Device::Type::kCpu), source ? 0u : 1u) << v1::OpType_Name(op);
  }
  EXPECT_EQ(ops.Find(v1::OP_UNSPECIFIED), nullptr);
}

TEST(OpRegistry, RefusesTwiceAndMissingShapeFunction) {
  OpRegistry ops;
  OpDef def;
  def.op = v1::RELU;
  EXPECT_EQ(ops.Register(def).code(), absl::StatusCode::kInvalidArgument);
  def.shape = [](const v1::NodeDef&, const std::vector<TypedShape>& in) { return in[0]; };
  EXPECT_TRUE(ops.Register(def).ok());
  EXPECT_EQ(ops.Register(def).code(), absl::StatusCode::kAlreadyExists);
}

TEST(OpRegistry, InferOutputChecksInputCountAndUnknownOps) {
  OpRegistry ops = BuiltinOps();
  v1::NodeDef node;
  node.set_op(v1::MATMUL);
  node.set_name("mm");
  auto one = ops.InferOutput(node, {TypedShape{Shape{2, 3}, DType::kF32}});
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(one.status().message().find("takes 2 inputs, got 1"), std::string::npos);
  auto ok = ops.InferOutput(
      node, {TypedShape{Shape{-1, 3}, DType::kF32}, TypedShape{Shape{3, 4}, DType::kF32}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->shape, (Shape{-1, 4}));
  OpRegistry empty;
  EXPECT_EQ(empty.InferOutput(node, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpRegistry, CreateKernelByDevice) {
  OpRegistry ops = BuiltinOps();
  v1::NodeDef node;
  node.set_op(v1::RELU);
  node.set_name("r");
  EXPECT_TRUE(ops.CreateKernel(Device::Type::kCpu, node, DType::kF32).ok());
  EXPECT_TRUE(ops.CreateKernel(Device::Type::kCuda, node, DType::kF32).ok());
  // CUDA kernels compute in f32 only.
  absl::Status f64 = ops.CreateKernel(Device::Type::kCuda, node, DType::kF64).status();
  EXPECT_EQ(f64.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f64.message(), ::testing::HasSubstr("CUDA kernels compute in f32, not f64"));
  node.set_op(v1::MEAN_SQUARED_ERROR);  // no CUDA kernel yet
  absl::Status none = ops.CreateKernel(Device::Type::kCuda, node, DType::kF32).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(none.message(), ::testing::HasSubstr("no CUDA kernel for MEAN_SQUARED_ERROR node r"));
  node.set_op(v1::RELU);
  EXPECT_EQ(ops.CreateKernel(Device::Type::kCpu, node, DType::kI64).status().code(),
            absl::StatusCode::kInvalidArgument);
  node.set_op(v1::INPUT);
  EXPECT_EQ(ops.CreateKernel(Device::Type::kCpu, node, DType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::engine

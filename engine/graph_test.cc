#include "engine/graph.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::testing::HasSubstr;

TEST(Graph, InfersStaticShapesWithUnknownBatch) {
  Graph g(3);
  int x = *g.Input("features", DType::kF32, Shape{-1, 8, 8, 1});
  int f = *g.Variable("conv/kernel", DType::kF32, Shape{3, 3, 1, 4}, v1::Initializer(), 9, 36);
  int c = *g.Conv2D(x, f, {1, 1}, v1::SAME);
  EXPECT_EQ(g.shape(c), (Shape{-1, 8, 8, 4}));
  int p = *g.MaxPool2D(c, {2, 2}, {}, v1::VALID);
  EXPECT_EQ(g.shape(p), (Shape{-1, 4, 4, 4}));
  int flat = *g.Op(v1::FLATTEN, {p});
  EXPECT_EQ(g.shape(flat), (Shape{-1, 64}));
  int r = *g.Reshape(flat, {-1, 4, 16});
  EXPECT_EQ(g.shape(r), (Shape{-1, 4, 16}));
  int m = *g.Mean(r, {1}, true);
  EXPECT_EQ(g.shape(m), (Shape{-1, 1, 16}));
  EXPECT_EQ(g.Variables().size(), 1u);
  EXPECT_EQ(g.Variables()[0].name, "conv/kernel");
}

TEST(Graph, RefusesMismatchesNamingTheNode) {
  Graph g;
  int a = *g.Input("a", DType::kF32, Shape{-1, 3});
  int b = *g.Variable("w", DType::kF32, Shape{4, 2}, v1::Initializer(), 4, 2);
  auto mm = g.Op(v1::MATMUL, {a, b}, "dense");
  ASSERT_EQ(mm.status().code(), absl::StatusCode::kInvalidArgument) << mm.status();
  EXPECT_THAT(std::string(mm.status().message()), HasSubstr("MATMUL node \"dense\""));
  EXPECT_THAT(std::string(mm.status().message()), HasSubstr("[?,3] by [4,2]"));
  auto expect_refused = [](const absl::Status& s, absl::string_view part) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(part));
  };
  expect_refused(g.Op(v1::RELU, {a, a}).status(), "takes 1 inputs, got 2");
  expect_refused(g.Op(v1::RELU, {17}).status(), "input 17 does not name an earlier node");
  expect_refused(g.Variable("w", DType::kF32, Shape{1}, v1::Initializer(), 1, 1).status(),
                 "variable name \"w\" is already used");
  expect_refused(g.Dropout(a, 1.0f).status(), "rate 1 is not in [0, 1)");
  expect_refused(g.SetLoss(a), "is not a floating scalar node");  // not a scalar
  int labels = *g.Input("labels", DType::kF32, Shape{-1});
  expect_refused(g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {a, labels}).status(),
                 "labels must be i32 or i64");  // float labels
}

TEST(Graph, ProtoRoundTripAndValidation) {
  Graph g(11);
  int x = *g.Input("features", DType::kF32, Shape{-1, 4});
  int w = *g.Variable("d/kernel", DType::kF32, Shape{4, 3}, v1::Initializer(), 4, 3);
  int y = *g.Op(v1::MATMUL, {x, w});
  int l = *g.Input("labels", DType::kI64, Shape{-1});
  int loss = *g.Op(v1::SPARSE_SOFTMAX_CROSS_ENTROPY, {y, l});
  ASSERT_TRUE(g.SetLoss(loss).ok());
  g.set_output(y);
  auto back = Graph::FromProto(g.proto());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->proto().SerializeAsString(), g.proto().SerializeAsString());

  v1::GraphDef bad = g.proto();
  bad.mutable_nodes(2)->set_inputs(1, 3);  // not topological
  auto refused = Graph::FromProto(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("graph node 2"));
  bad = g.proto();
  bad.set_loss(0);
  auto bad_loss = Graph::FromProto(bad);
  EXPECT_EQ(bad_loss.status().code(), absl::StatusCode::kInvalidArgument) << bad_loss.status();
  EXPECT_THAT(std::string(bad_loss.status().message()),
              HasSubstr("graph loss index 0 is not a floating scalar node"));
}

}  // namespace
}  // namespace lockstep::engine

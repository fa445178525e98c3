// Scatter-gather SendRecv (transport.h) over every transport: messages gathered from many
// small pieces (some empty) and scattered into pieces cut differently on the other end, or
// fed to a reduction sink; both directions at once, larger than the shm ring and than one
// sendmsg's iovec batch, so every transport moves them in several rounds.
#include <memory>
#include <numeric>
#include <vector>

#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "collectives/test_util.h"
#include "collectives/transport/inproc/inproc_transport.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

enum class Kind { kInProc, kTcp, kShm, kShmCma };

std::vector<std::unique_ptr<Transport>> Connect(Kind kind) {
  std::vector<std::unique_ptr<Transport>> group(2);
  if (kind == Kind::kInProc) {
    auto hub = std::make_shared<InProcHub>(2);
    for (int r = 0; r < 2; ++r) group[r] = std::make_unique<InProcTransport>(hub, r);
    return group;
  }
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  RunRanks(2, [&](int r) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    if (kind == Kind::kTcp) {
      auto t = TcpTransport::Connect({"secret", prefix, r, 2}, prefix, &store, {}, deadline);
      ASSERT_TRUE(t.ok()) << t.status();
      group[r] = std::move(t).value();
    } else {
      ShmOptions o;
      o.ring_bytes = 64 << 10;  // messages wrap around the ring many times
      if (kind == Kind::kShmCma) o.cma_threshold_bytes = 4 << 10;
      auto t = ShmTransport::Connect(r, 2, prefix, &store, o, deadline);
      ASSERT_TRUE(t.ok()) << t.status();
      group[r] = std::move(t).value();
    }
  });
  return group;
}

// Cuts `mem` into pieces of random lengths (multiples of `unit`, a third of them empty).
std::vector<BufferPiece> Cut(std::vector<char>& mem, size_t unit, absl::BitGen& gen) {
  std::vector<BufferPiece> pieces;
  size_t at = 0;
  while (at < mem.size()) {
    size_t len = absl::Uniform<size_t>(gen, 0, 3) == 0 ? 0 : unit * absl::Uniform(gen, 1, 600);
    if (mem.size() < 4096) len = len % 40;  // small messages: many pieces too
    len = std::min(len, mem.size() - at);
    pieces.push_back({mem.data() + at, len});
    at += len;
  }
  pieces.push_back({mem.data() + at, 0});
  return pieces;
}

class ScatterGatherTest : public ::testing::TestWithParam<Kind> {};

TEST_P(ScatterGatherTest, PiecesToPiecesBothWays) {
  auto group = Connect(GetParam());
  ASSERT_EQ(group.size(), 2u);
  absl::BitGen gen;
  // A small message (shm: cache lines) and one larger than the rings.
  for (size_t len : {size_t{200}, size_t{(1 << 20) + 24}}) {
    std::vector<std::vector<char>> out(2, std::vector<char>(len)), in(2, std::vector<char>(len));
    std::vector<std::vector<BufferPiece>> out_pieces(2), in_pieces(2);
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < len; ++i) out[r][i] = static_cast<char>(i * 7 + r * 13);
      out_pieces[r] = Cut(out[r], 1, gen);
      in_pieces[r] = Cut(in[r], 1, gen);
    }
    RunRanks(2, [&](int r) {
      SendSpec s{1 - r, nullptr, len, out_pieces[r]};
      RecvSpec rv{1 - r, nullptr, len, 1, nullptr, in_pieces[r]};
      if (r == 1) rv = {0, in[r].data(), len};  // one buffer on one end, pieces on the other
      absl::Status st = group[r]->SendRecv(s, rv, absl::Now() + absl::Seconds(20));
      ASSERT_TRUE(st.ok()) << st;
    });
    EXPECT_EQ(in[0], out[1]) << len;
    EXPECT_EQ(in[1], out[0]) << len;
  }
}

TEST_P(ScatterGatherTest, PiecesIntoAReductionSinkInWholeElements) {
  auto group = Connect(GetParam());
  ASSERT_EQ(group.size(), 2u);
  constexpr size_t kCount = (300 << 10) + 3;
  absl::BitGen gen;
  std::vector<std::vector<char>> out(2, std::vector<char>(kCount * 8));
  std::vector<std::vector<BufferPiece>> pieces(2);
  for (int r = 0; r < 2; ++r) {
    int64_t* v = reinterpret_cast<int64_t*>(out[r].data());
    std::iota(v, v + kCount, int64_t{r * 1000});
    pieces[r] = Cut(out[r], 8, gen);
  }
  std::vector<std::vector<int64_t>> sum(2, std::vector<int64_t>(kCount, 1));
  RunRanks(2, [&](int r) {
    auto add = [&](size_t offset, const void* data, size_t bytes) {
      ASSERT_EQ(offset % 8, 0u);
      ASSERT_EQ(bytes % 8, 0u);
      const int64_t* v = static_cast<const int64_t*>(data);
      for (size_t i = 0; i < bytes / 8; ++i) sum[r][offset / 8 + i] += v[i];
    };
    RecvSink sink(add);
    absl::Status st =
        group[r]->SendRecv({1 - r, nullptr, kCount * 8, pieces[r]},
                           {1 - r, nullptr, kCount * 8, 8, &sink}, absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(st.ok()) << st;
  });
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(sum[r][i], static_cast<int64_t>((1 - r) * 1000 + i + 1)) << r << " at " << i;
    }
  }
}

TEST_P(ScatterGatherTest, EmptyPiecesOnlyIsAnEmptyMessage) {
  auto group = Connect(GetParam());
  ASSERT_EQ(group.size(), 2u);
  char c = 0;
  std::vector<BufferPiece> none = {{&c, 0}, {&c, 0}};
  RunRanks(2, [&](int r) {
    absl::Status st =
        group[r]->SendRecv({1 - r, nullptr, 0, none}, {1 - r, nullptr, 0, 1, nullptr, none},
                           absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(st.ok()) << st;
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, ScatterGatherTest,
                         ::testing::Values(Kind::kInProc, Kind::kTcp, Kind::kShm, Kind::kShmCma),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           switch (info.param) {
                             case Kind::kInProc:
                               return "inproc";
                             case Kind::kTcp:
                               return "tcp";
                             case Kind::kShm:
                               return "shm";
                             default:
                               return "shm_cma";
                           }
                         });

}  // namespace
}  // namespace collectives
}  // namespace lockstep

#include "collectives/transport/shm/shm_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "collectives/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

// Single copy from 64 KiB on, whatever the number of CPUs.
ShmOptions Cma() {
  ShmOptions o;
  o.cma_threshold_bytes = 64 << 10;
  return o;
}

// Connects `n` ShmTransports (threads of this process) with per-rank options.
std::vector<std::unique_ptr<ShmTransport>> ConnectGroup(const std::vector<ShmOptions>& options) {
  const int n = static_cast<int>(options.size());
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  std::vector<std::unique_ptr<ShmTransport>> group(n);
  RunRanks(n, [&](int r) {
    auto t =
        ShmTransport::Connect(r, n, prefix, &store, options[r], absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(t.ok()) << t.status();
    group[r] = std::move(t).value();
  });
  return group;
}

// A peer's advert is a length from another process: a segment is mapped only at the size it
// really has, so an advert of 1 TiB for a 4 KiB segment maps nothing.
TEST(ShmTransportTest, APeerAdvertisingAWrongSegmentSizeIsRefused) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  const std::string name = absl::StrCat("/", prefix, "-fake-peer");
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  ASSERT_TRUE(
      store.Set(absl::StrCat(prefix, "/shm/1"), absl::StrCat(name, " ", int64_t{1} << 40)).ok());
  auto t =
      ShmTransport::Connect(0, 2, prefix, &store, ShmOptions{}, absl::Now() + absl::Seconds(20));
  shm_unlink(name.c_str());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();
  EXPECT_NE(t.status().message().find("advertised as 1099511627776 bytes but holds 4096"),
            absl::string_view::npos)
      << t.status();
}

// Rank r's send buffer of `count` words: from its transport's heap when `from_heap` (freed
// at scope end), else ordinary memory.
class SendBuffer {
 public:
  SendBuffer(ShmTransport& t, size_t count, bool from_heap)
      : heap_(from_heap ? t.heap() : nullptr) {
    if (heap_ != nullptr) {
      data_ = static_cast<int64_t*>(heap_->Allocate(count * sizeof(int64_t)));
    } else {
      ordinary_.resize(count);
      data_ = ordinary_.data();
    }
  }
  ~SendBuffer() {
    if (heap_ != nullptr) heap_->Free(data_);
  }
  int64_t* data() const { return data_; }

 private:
  std::shared_ptr<TransportHeap> heap_;
  std::vector<int64_t> ordinary_;
  int64_t* data_ = nullptr;
};

// Both directions at once between two ranks, one message copied and one reduced through the
// sink, of sizes below and above the CMA and heap thresholds; checks every byte. With
// `from_heap`, each rank sends from its heap (when it has one).
void ExchangeAndCheck(std::vector<std::unique_ptr<ShmTransport>>& group, bool from_heap = false) {
  for (size_t len : {size_t{64}, size_t{(64 << 10) - 8}, size_t{64 << 10}, size_t{(1 << 20) - 8},
                     size_t{1 << 20}, size_t{3 << 20} + 8}) {
    const size_t count = len / sizeof(int64_t);
    std::vector<std::unique_ptr<SendBuffer>> out;
    for (int r = 0; r < 2; ++r) {
      out.push_back(std::make_unique<SendBuffer>(*group[r], count, from_heap));
      ASSERT_NE(out[r]->data(), nullptr) << "heap full";
      std::iota(out[r]->data(), out[r]->data() + count, int64_t{r * 1000});
    }
    std::vector<std::vector<int64_t>> in(2, std::vector<int64_t>(count, 1));
    RunRanks(2, [&](int r) {
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      // Rank 0 copies what rank 1 sends; rank 1 adds what rank 0 sends into `in`.
      auto add = [&](size_t offset, const void* data, size_t bytes) {
        ASSERT_EQ(offset % sizeof(int64_t), 0u);
        ASSERT_EQ(bytes % sizeof(int64_t), 0u);
        const int64_t* v = static_cast<const int64_t*>(data);
        for (size_t i = 0; i < bytes / sizeof(int64_t); ++i) in[r][offset / 8 + i] += v[i];
      };
      RecvSink sink(add);
      RecvSpec recv{1 - r, in[r].data(), len, sizeof(int64_t), r == 1 ? &sink : nullptr};
      absl::Status s = group[r]->SendRecv({1 - r, out[r]->data(), len}, recv, deadline);
      ASSERT_TRUE(s.ok()) << s;
    });
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(in[0][i], static_cast<int64_t>(1000 + i)) << "len " << len << " at " << i;
      ASSERT_EQ(in[1][i], static_cast<int64_t>(i + 1)) << "len " << len << " at " << i;
    }
  }
}

TEST(ShmTransportTest, SingleCopyWhenEveryRankCanReadEveryOther) {
  auto group = ConnectGroup({Cma(), Cma()});
  ASSERT_EQ(group.size(), 2u);
  EXPECT_TRUE(group[0]->cma_enabled());
  EXPECT_TRUE(group[1]->cma_enabled());
  ExchangeAndCheck(group);
}

TEST(ShmTransportTest, FallsBackToRingsWhenOneRankCannotUseSingleCopy) {
  ShmOptions off;
  off.cma_threshold_bytes = 0;  // as a rank whose probe failed (EPERM) reports
  auto group = ConnectGroup({off, Cma()});
  EXPECT_FALSE(group[0]->cma_enabled());
  EXPECT_FALSE(group[1]->cma_enabled());  // the whole group agrees
  ExchangeAndCheck(group);
}

TEST(ShmTransportTest, RanksWithDifferentThresholdsUseTheRings) {
  ShmOptions other;
  other.cma_threshold_bytes = 1 << 20;
  auto group = ConnectGroup({other, Cma()});
  EXPECT_FALSE(group[0]->cma_enabled());
  EXPECT_FALSE(group[1]->cma_enabled());
  ExchangeAndCheck(group);
}

// Rank 0 sends `len` bytes at `data` that rank 1 never reads, waiting for the receiver's
// acknowledgement; Abort() from another thread, once the send is blocked, ends it.
void ExpectAbortEndsAnUnreadSend(ShmTransport& sender, const void* data, size_t len) {
  AbortedCall call = AbortWhileBlocked(sender, {1, data, len}, {});
  EXPECT_TRUE(call.blocked) << "the send never blocked waiting for rank 1";
  LogAbortLatency("shm unread send", call.latency);
  EXPECT_EQ(call.status.code(), absl::StatusCode::kAborted) << call.status;
  EXPECT_LT(call.latency, kAbortLatencyBound);
}

TEST(ShmTransportTest, AbortEndsASingleCopySendThatIsNeverRead) {
  auto group = ConnectGroup({Cma(), Cma()});
  ASSERT_TRUE(group[0]->cma_enabled());
  std::vector<char> big(1 << 20);
  ExpectAbortEndsAnUnreadSend(*group[0], big.data(), big.size());
}

ShmOptions Heap() {
  ShmOptions o;
  o.heap_bytes = 8 << 20;
  return o;
}

TEST(ShmTransportTest, HeapMessagesAreReadInPlaceAndOthersGoInline) {
  auto group = ConnectGroup({Heap(), Heap()});
  ASSERT_NE(group[0]->heap(), nullptr);
  EXPECT_TRUE(group[0]->direct_enabled());
  EXPECT_TRUE(group[1]->direct_enabled());
  ExchangeAndCheck(group, /*from_heap=*/true);
  ExchangeAndCheck(group, /*from_heap=*/false);  // framed, inline
  ExchangeAndCheck(group, /*from_heap=*/true);   // and back: the rings stayed in step
}

TEST(ShmTransportTest, GroupWithoutHeapOnEveryRankUsesTheRings) {
  auto group = ConnectGroup({Heap(), ShmOptions()});
  EXPECT_NE(group[0]->heap(), nullptr);  // still allocates: buffers work, with a copy more
  EXPECT_EQ(group[1]->heap(), nullptr);
  EXPECT_FALSE(group[0]->direct_enabled());
  EXPECT_FALSE(group[1]->direct_enabled());
  ExchangeAndCheck(group, /*from_heap=*/true);
}

// A message scattered over heap pieces whose boundaries split elements (the sink must still
// get whole ones), received once reduced and once copied into differently cut pieces; then
// one whose last piece lies outside the heap, which goes inline.
TEST(ShmTransportTest, ScatteredHeapMessagesSplitAnywhere) {
  ShmOptions o = Heap();
  o.direct_threshold_bytes = 1024;
  auto group = ConnectGroup({o, o});
  ASSERT_TRUE(group[0]->direct_enabled());
  std::shared_ptr<TransportHeap> heap = group[0]->heap();
  const size_t cuts[] = {12, 4, 4096, 20, 1, 3, 2000, 4};  // 6140 bytes
  const size_t len = 6140 / 8 * 8;                         // whole int64 words: 6136
  std::vector<BufferPiece> pieces;
  size_t total = 0;
  for (size_t c : cuts) {
    const size_t take = std::min(c, len - total);
    pieces.push_back({heap->Allocate(take), take});
    total += take;
  }
  ASSERT_EQ(total, len);
  std::vector<char> outside(64);
  for (bool last_outside : {false, true}) {
    if (last_outside) pieces.back().data = outside.data();
    size_t k = 0;
    for (const BufferPiece& p : pieces) {
      for (size_t i = 0; i < p.bytes; ++i) static_cast<char*>(p.data)[i] = char(k++ * 13 + 5);
    }
    for (bool reduce : {true, false}) {
      std::vector<char> got(len, 0);
      std::vector<BufferPiece> targets = {{got.data(), 100}, {got.data() + 100, len - 100}};
      auto add = [&](size_t offset, const void* data, size_t bytes) {
        ASSERT_EQ(offset % 8, 0u);
        ASSERT_EQ(bytes % 8, 0u);
        std::memcpy(&got[offset], data, bytes);
      };
      RecvSink sink(add);
      RecvSpec recv{0, nullptr, len, 8, reduce ? &sink : nullptr};
      if (!reduce) recv.pieces = absl::MakeConstSpan(targets);
      RunRanks(2, [&](int r) {
        const absl::Time deadline = absl::Now() + absl::Seconds(20);
        SendSpec send;
        if (r == 0) send = {1, nullptr, len, absl::MakeConstSpan(pieces)};
        absl::Status s = group[r]->SendRecv(send, r == 1 ? recv : RecvSpec{}, deadline);
        ASSERT_TRUE(s.ok()) << s;
      });
      for (size_t i = 0; i < len; ++i) {
        ASSERT_EQ(got[i], char(i * 13 + 5)) << "byte " << i << (reduce ? " reduced" : " copied");
      }
    }
  }
  for (size_t i = 0; i + 1 < pieces.size(); ++i) heap->Free(pieces[i].data);
}

TEST(ShmTransportTest, HeapBuffersOutliveTheTransport) {
  auto group = ConnectGroup({Heap(), Heap()});
  std::shared_ptr<TransportHeap> heap = group[0]->heap();
  char* p = static_cast<char*>(heap->Allocate(1 << 20));
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, 1 << 20);
  group.clear();  // the segment stays mapped while the heap is referenced
  std::memset(p, 9, 1 << 20);
  EXPECT_EQ(p[(1 << 20) - 1], 9);
  heap->Free(p);
}

TEST(ShmTransportTest, HeapLargerThanDevShmIsLeftOutWithAWarning) {
  ShmOptions huge;
  huge.heap_bytes = size_t{1} << 44;  // 16 TiB
  auto group = ConnectGroup({huge, huge});
  EXPECT_EQ(group[0]->heap(), nullptr);
  EXPECT_FALSE(group[0]->direct_enabled());
  ExchangeAndCheck(group);
}

TEST(ShmTransportTest, RequiredHeapLargerThanDevShmFailsClearlyAtConnect) {
  ShmOptions huge;
  huge.heap_bytes = size_t{1} << 44;  // 16 TiB
  huge.heap_required = true;
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  RunRanks(2, [&](int r) {
    auto t = ShmTransport::Connect(r, 2, prefix, &store, huge, absl::Now() + absl::Seconds(5));
    ASSERT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted) << t.status();
    EXPECT_NE(t.status().message().find("/dev/shm"), std::string::npos) << t.status();
    EXPECT_NE(t.status().message().find("rank " + std::to_string(r)), std::string::npos);
  });
}

TEST(ShmTransportTest, HeapAndCmaAreAlternatives) {
  ShmOptions both = Heap();
  both.cma_threshold_bytes = 64 << 10;
  InMemoryStore store;
  auto t =
      ShmTransport::Connect(0, 2, UniquePrefix(), &store, both, absl::Now() + absl::Seconds(5));
  ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  EXPECT_NE(t.status().message().find("heap_bytes"), std::string::npos) << t.status();
}

TEST(ShmTransportTest, AbortEndsAHeapSendThatIsNeverRead) {
  auto group = ConnectGroup({Heap(), Heap()});
  ASSERT_TRUE(group[0]->direct_enabled());
  std::shared_ptr<TransportHeap> heap = group[0]->heap();
  void* big = heap->Allocate(1 << 20);
  ExpectAbortEndsAnUnreadSend(*group[0], big, 1 << 20);
  heap->Free(big);
}

// Small messages (slots with a flag) and ring messages between the same pair keep their
// order; a sender that runs more than the pair's 32 slots ahead waits for the receiver (else
// it would overwrite unread slots); the sink gets whole elements. Lengths around one cache
// line (56 payload bytes share the flag's line) and the small-message limit.
TEST(ShmTransportTest, SmallMessagesKeepOrderWithRingMessagesAndWaitForRoom) {
  auto group = ConnectGroup({ShmOptions(), ShmOptions()});
  const size_t cycle[] = {8, 56, 64, 112, kShmSmallMessageBytes, kShmSmallMessageBytes + 8, 1024};
  std::vector<size_t> lengths;
  for (int i = 0; i < 300; ++i) lengths.push_back(cycle[i % 7]);
  auto byte = [](size_t msg, size_t i) { return static_cast<char>(msg * 31 + i * 7); };
  std::atomic<int> sent{0};
  std::thread sender([&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (size_t m = 0; m < lengths.size(); ++m) {
      std::string out(lengths[m], 0);
      for (size_t i = 0; i < out.size(); ++i) out[i] = byte(m, i);
      ASSERT_TRUE(group[0]->SendRecv({1, out.data(), out.size()}, {}, deadline).ok());
      sent.fetch_add(1);
    }
  });
  // Read nothing until rank 0 has used all 32 slots (5 small messages in every 7: message 44
  // is the 33rd small one, which must wait).
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (sent.load() < 44 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(sent.load(), 44);
  for (size_t m = 0; m < lengths.size(); ++m) {
    std::string got(lengths[m], 0);
    auto copy = [&](size_t offset, const void* data, size_t bytes) {
      ASSERT_EQ(offset % 8, 0u);
      ASSERT_EQ(bytes % 8, 0u);
      std::memcpy(&got[offset], data, bytes);
    };
    RecvSink sink(copy);
    RecvSpec recv{0, got.data(), got.size(), 8, m % 2 ? &sink : nullptr};
    ASSERT_TRUE(group[1]->SendRecv({}, recv, deadline).ok());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], byte(m, i)) << "message " << m << " byte " << i;
    }
  }
  sender.join();
  EXPECT_EQ(sent.load(), 300);
}

// A small message travels in one slot whose flag (its sequence number) is written after the
// whole payload: payload words that look like sequence numbers, past and future, must never
// be taken for a flag, and a message is read whole, never half written. Both directions at
// once, the second of each pair of calls reduced straight out of the slot.
TEST(ShmTransportTest, SmallMessagesArriveWholeWhateverTheirPayload) {
  auto group = ConnectGroup({ShmOptions(), ShmOptions()});
  constexpr size_t kWords = kShmSmallMessageBytes / sizeof(uint64_t);
  RunRanks(2, [&](int r) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (uint64_t m = 0; m < 200; ++m) {
      const size_t words = m % 3 == 0 ? kWords : 1 + m % kWords;
      std::vector<uint64_t> out(words), in(words, 0);
      // Every word is a sequence number the slots will see, or its owner's message number.
      for (size_t i = 0; i < words; ++i) out[i] = i == 0 ? m * 2 + r : m + 1 + i;
      auto add = [&](size_t offset, const void* data, size_t bytes) {
        const uint64_t* w = static_cast<const uint64_t*>(data);
        for (size_t i = 0; i < bytes / 8; ++i) in[offset / 8 + i] += w[i];
      };
      RecvSink sink(add);
      RecvSpec recv{1 - r, in.data(), words * 8, 8, m % 2 ? &sink : nullptr};
      ASSERT_TRUE(group[r]->SendRecv({1 - r, out.data(), words * 8}, recv, deadline).ok());
      for (size_t i = 0; i < words; ++i) {
        ASSERT_EQ(in[i], i == 0 ? m * 2 + (1 - r) : m + 1 + i) << "message " << m << " word " << i;
      }
    }
  });
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

namespace lockstep::collectives {
namespace {

// A call whose bytes are always there never waits, where the deadline used to be checked, yet
// it must not run past its deadline either: rank 1 streams 16 MiB through a 64 KiB ring and
// rank 0 reduces each ring's worth slowly, a millisecond a piece (256 pieces in all).
TEST(ShmTransportTest, ACallThatKeepsMakingProgressStillEndsAtItsDeadline) {
  ShmOptions small_ring;
  small_ring.ring_bytes = 64 << 10;
  auto group = ConnectGroup({small_ring, small_ring});
  ASSERT_EQ(group.size(), 2u);
  ASSERT_TRUE(group[0] != nullptr && group[1] != nullptr);
  std::vector<char> out(16 << 20, 1), in(out.size());
  absl::Status sent;
  std::thread sender([&] {
    sent = group[1]->SendRecv({0, out.data(), out.size()}, {}, absl::Now() + absl::Seconds(60));
  });
  auto slow = [](size_t, const void*, size_t) {
    absl::SleepFor(absl::Milliseconds(10));  // the slow reduction under test
  };
  RecvSink sink(slow);
  // 16 MiB through a 64 KiB ring reaches the sink in >= 256 pieces, 10 ms each: a call that ran
  // to the end would be >= 2.4 s late; it may be kLate late (a loaded machine's scheduling).
  constexpr absl::Duration kLate = absl::Seconds(1);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
  absl::Status s = group[0]->SendRecv({}, {1, in.data(), in.size(), 1, &sink}, deadline);
  const absl::Duration late = absl::Now() - deadline;
  group[1]->Abort();  // the sender would wait for room until its own deadline
  sender.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("receiving from rank 1"), absl::string_view::npos) << s;
  EXPECT_LT(late, kLate);
  EXPECT_EQ(sent.code(), absl::StatusCode::kAborted) << sent;
}

TEST(ShmWaitPolicyTest, SleepsAtOnceOnlyWhenComputeThreadsShareTheCores) {
  // Every rank has a core: spin, then yield for about a millisecond.
  ShmWaitPolicy alone = ChooseShmWaitPolicy(2, 1, 2);
  EXPECT_EQ(alone.spin_iterations, 256);
  EXPECT_EQ(alone.yield_iterations, 2000);
  // More ranks than cores: yield at once (the core may go to the rank we wait for).
  ShmWaitPolicy crowded = ChooseShmWaitPolicy(4, 1, 2);
  EXPECT_EQ(crowded.spin_iterations, 1);
  EXPECT_EQ(crowded.yield_iterations, 1000);
  EXPECT_EQ(ChooseShmWaitPolicy(4, 3, 2).yield_iterations, 1000);
  // The ranks fit, their compute threads do not: a yield would only run our own compute
  // thread, so sleep at once and let the peer's wake-up preempt it.
  ShmWaitPolicy training = ChooseShmWaitPolicy(2, 2, 2);
  EXPECT_EQ(training.spin_iterations, 0);
  EXPECT_EQ(training.yield_iterations, 0);
  // The same workers on a larger host keep spinning.
  EXPECT_EQ(ChooseShmWaitPolicy(2, 2, 16).spin_iterations, 256);
}

}  // namespace
}  // namespace lockstep::collectives

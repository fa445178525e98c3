// The TCP transport's handshake refuses stray and wrong-secret connections; data and
// failures cross real loopback sockets.
#include "collectives/transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/communicator.h"
#include "collectives/in_memory_store.h"
#include "collectives/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// Connects n TcpTransports with `options` through one store, one thread per rank.
std::vector<std::unique_ptr<TcpTransport>> ConnectTcp(int n, const TcpOptions& options) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  std::vector<std::unique_ptr<TcpTransport>> t(n);
  RunRanks(n, [&](int r) {
    auto connected = TcpTransport::Connect({"s", prefix, r, n}, prefix, &store, options, Soon());
    ASSERT_TRUE(connected.ok()) << connected.status();
    t[r] = std::move(connected).value();
  });
  return t;
}

TEST(TcpTransportTest, WrongSecretIsRefusedAndTheRightPeerStillJoins) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  absl::StatusOr<std::unique_ptr<TcpTransport>> rank0;
  std::thread acceptor([&] {
    rank0 = TcpTransport::Connect({"right", prefix, 0, 2}, prefix, &store, {}, Soon());
  });
  // An impostor claiming rank 1 with the wrong secret: refused before any data.
  auto address = store.Get(absl::StrCat(prefix, "/tcp/0"), Soon());
  ASSERT_TRUE(address.ok());
  auto fd = ConnectWithRetry(*address, Soon());
  ASSERT_TRUE(fd.ok());
  absl::Status bad = HandshakeAsConnector(fd->get(), {"wrong", prefix, 1, 2}, 0, Soon()).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kUnauthenticated) << bad;
  // A stray client that speaks no protocol at all: its bytes are never taken as a peer.
  auto stray = ConnectWithRetry(*address, Soon());
  ASSERT_TRUE(stray.ok());
  ASSERT_TRUE(WriteFull(stray->get(), "GET / HTTP/1.0\r\n\r\n", 18, Soon()).ok());
  stray->Reset();
  // The real rank 1 (other store keys are already set by rank 0 only).
  auto rank1 = TcpTransport::Connect({"right", prefix, 1, 2}, prefix, &store, {}, Soon());
  acceptor.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  // Data flows between the two real ranks.
  int out = 42, in = 0;
  std::thread sender([&] { ASSERT_TRUE((*rank0)->SendRecv({1, &out, 4}, {}, Soon()).ok()); });
  ASSERT_TRUE((*rank1)->SendRecv({}, {0, &in, 4}, Soon()).ok());
  sender.join();
  EXPECT_EQ(in, 42);
}

TEST(TcpTransportTest, ASilentConnectionDoesNotHoldUpTheRealPeer) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  TcpOptions options;
  // Longer than the whole connect deadline: an acceptor that finished one handshake before
  // starting the next would still be waiting on the silent connection at the deadline.
  options.handshake_timeout = absl::Seconds(30);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<TcpTransport>> rank0;
  std::thread acceptor([&] {
    rank0 = TcpTransport::Connect({"s", prefix, 0, 2}, prefix, &store, options, deadline);
  });
  auto address = store.Get(absl::StrCat(prefix, "/tcp/0"), deadline);
  ASSERT_TRUE(address.ok());
  // Connects first and never says a word (it stays open until the end of the test).
  auto silent = ConnectWithRetry(*address, deadline);
  ASSERT_TRUE(silent.ok());
  auto rank1 = TcpTransport::Connect({"s", prefix, 1, 2}, prefix, &store, options, deadline);
  acceptor.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  int out = 7, in = 0;
  std::thread sender([&] { ASSERT_TRUE((*rank1)->SendRecv({0, &out, 4}, {}, deadline).ok()); });
  ASSERT_TRUE((*rank0)->SendRecv({}, {1, &in, 4}, deadline).ok());
  sender.join();
  EXPECT_EQ(in, 7);
}

// Threads of this process now.
int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// Waits until `fd` is readable (the acceptor wrote its hello or closed it), until `deadline`.
bool Readable(int fd, absl::Time deadline) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, PollTimeoutMs(deadline, 100000)) == 1;
}

// True once the acceptor closed `fd` (after its hello, which is read and dropped).
bool ClosedByPeer(int fd, absl::Time deadline) {
  char buf[64];
  while (Readable(fd, deadline)) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
  return false;
}

// A flood of connections that never prove themselves: the acceptor spends no thread on them,
// holds at most max_pending_handshakes at once, cuts each at its handshake deadline, and the
// real peers still join (one while the flood is held open, one after).
TEST(TcpTransportTest, AFloodOfSilentConnectionsCostsNoThreadsAndTheRealPeersStillJoin) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  TcpOptions options;
  options.handshake_timeout = absl::Seconds(1);
  options.max_pending_handshakes = 16;
  const absl::Time deadline = absl::Now() + absl::Seconds(40);
  std::vector<absl::StatusOr<std::unique_ptr<TcpTransport>>> ranks(3);
  std::atomic<bool> rank0_done{false};
  std::thread rank0([&] {
    ranks[0] = TcpTransport::Connect({"s", prefix, 0, 3}, prefix, &store, options, deadline);
    rank0_done.store(true);
  });
  auto address = store.Get(absl::StrCat(prefix, "/tcp/0"), deadline);
  ASSERT_TRUE(address.ok());
  const int threads_before = ThreadCount();
  constexpr int kFlood = 120;
  std::vector<UniqueFd> flood;
  for (int i = 0; i < kFlood; ++i) {
    auto fd = ConnectWithRetry(*address, deadline);
    ASSERT_TRUE(fd.ok()) << fd.status();
    flood.push_back(std::move(*fd));
  }
  // Every flood connection was taken from the backlog (greeted, or evicted at the cap).
  for (UniqueFd& fd : flood) ASSERT_TRUE(Readable(fd.get(), deadline));
  // A thread per connection would show 120 more here.
  EXPECT_LE(ThreadCount(), threads_before + 2) << "threads before the flood: " << threads_before;
  // The real rank 1 joins while the newest flood connections are still pending.
  std::thread rank1([&] {
    ranks[1] = TcpTransport::Connect({"s", prefix, 1, 3}, prefix, &store, options, deadline);
  });
  // Each flood connection is closed: the oldest evicted at the cap, the rest at their
  // handshake deadline, while rank 0 still waits for rank 2 (not at the end of Connect).
  const absl::Time cut_by = absl::Now() + absl::Seconds(10);
  for (UniqueFd& fd : flood) EXPECT_TRUE(ClosedByPeer(fd.get(), cut_by));
  EXPECT_FALSE(rank0_done.load()) << "rank 0 returned before rank 2 came";
  ranks[2] = TcpTransport::Connect({"s", prefix, 2, 3}, prefix, &store, options, deadline);
  rank1.join();
  rank0.join();
  for (int r = 0; r < 3; ++r)
    ASSERT_TRUE(ranks[r].ok()) << "rank " << r << ": " << ranks[r].status();
  int out = 9, in = 0;
  std::thread sender([&] { ASSERT_TRUE((*ranks[1])->SendRecv({0, &out, 4}, {}, deadline).ok()); });
  ASSERT_TRUE((*ranks[0])->SendRecv({}, {1, &in, 4}, deadline).ok());
  sender.join();
  EXPECT_EQ(in, 9);
}

TEST(TcpTransportTest, AConnectionThatProvesNothingIsCutAtItsHandshakeDeadline) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  TcpOptions options;
  options.handshake_timeout = absl::Milliseconds(300);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<TcpTransport>> rank0;
  std::thread acceptor([&] {
    rank0 = TcpTransport::Connect({"s", prefix, 0, 2}, prefix, &store, options, deadline);
  });
  auto address = store.Get(absl::StrCat(prefix, "/tcp/0"), deadline);
  ASSERT_TRUE(address.ok());
  auto silent = ConnectWithRetry(*address, deadline);
  ASSERT_TRUE(silent.ok());
  const absl::Time start = absl::Now();
  // Half a proof, then nothing: partial bytes do not extend the deadline.
  ASSERT_TRUE(Readable(silent->get(), deadline));
  char hello[kHelloBytes];
  ASSERT_TRUE(ReadFull(silent->get(), hello, sizeof(hello), deadline).ok());
  ASSERT_TRUE(
      WriteFull(silent->get(), std::string(kProofBytes / 2, 'p').data(), kProofBytes / 2, deadline)
          .ok());
  EXPECT_TRUE(ClosedByPeer(silent->get(), absl::Now() + absl::Seconds(10)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  auto rank1 = TcpTransport::Connect({"s", prefix, 1, 2}, prefix, &store, options, deadline);
  acceptor.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
}

TEST(TcpTransportTest, WrongGroupWithRightSecretIsRefused) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  std::thread acceptor([&] {
    // Times out: the only peer that shows up belongs to another group.
    auto t = TcpTransport::Connect({"s", prefix, 0, 2}, prefix, &store, {},
                                   absl::Now() + absl::Seconds(2));
    EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded);
  });
  auto address = store.Get(absl::StrCat(prefix, "/tcp/0"), Soon());
  ASSERT_TRUE(address.ok());
  auto fd = ConnectWithRetry(*address, Soon());
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(HandshakeAsConnector(fd->get(), {"s", "other-job", 1, 2}, 0, Soon()).status().code(),
            absl::StatusCode::kUnauthenticated);
  acceptor.join();
}

// A receive from a peer that never sends sleeps in poll(); Abort() from another thread wakes
// it.
TEST(TcpTransportTest, AbortEndsAReceiveBlockedInPoll) {
  auto group = ConnectTransports(TransportKind::kTcp, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<char> in(1 << 10);
  AbortedCall call = AbortWhileBlocked(*(*group)[0], {}, {1, in.data(), in.size()});
  EXPECT_TRUE(call.blocked) << "the receive never blocked waiting for rank 1";
  LogAbortLatency("tcp receive", call.latency);
  EXPECT_EQ(call.status.code(), absl::StatusCode::kAborted) << call.status;
  EXPECT_LT(call.latency, kAbortLatencyBound);
}

// A peer that sends a few bytes at a time, slowly, wakes poll() before it can time out: the
// deadline still ends the call. (Pieces of kMinMessageBytes: shorter messages travel padded.)
TEST(TcpTransportTest, APeerTricklingBytesCannotHoldACallPastItsDeadline) {
  auto group = ConnectTransports(TransportKind::kTcp, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  constexpr size_t kPiece = TcpTransport::kMinMessageBytes;
  // 256 pieces, one every 20 ms: 5.1 s, so a call held until the last piece would end ~5 s
  // past its 200 ms deadline; it may be at most kLate late (a loaded machine's scheduling).
  constexpr size_t kPieces = 256;
  constexpr absl::Duration kLate = absl::Seconds(2);
  std::vector<char> in(kPieces * kPiece);
  std::atomic<bool> done{false};
  std::thread trickler([&] {
    const std::vector<char> piece(kPiece, 1);
    for (size_t i = 0; i < kPieces && !done.load(); ++i) {
      if (!(*group)[1]->SendRecv({0, piece.data(), piece.size()}, {}, Soon()).ok()) return;
      absl::SleepFor(absl::Milliseconds(20));  // the slow peer under test
    }
  });
  const absl::Time deadline = absl::Now() + absl::Milliseconds(200);
  absl::Status s = (*group)[0]->SendRecv({}, {1, in.data(), in.size()}, deadline);
  const absl::Duration late = absl::Now() - deadline;
  done.store(true);
  trickler.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("receiving from rank 1"), absl::string_view::npos) << s;
  EXPECT_LT(late, kLate);
}

// A call whose bytes are always there never waits in poll(), where the deadline used to be
// checked, yet it must not run past its deadline either: here rank 1 sends 64 KiB at once and
// rank 0 reduces them slowly, 64 bytes every 4 ms (4 s in all, so a call that ran to the end
// would be ~4 s late; it may be kLate late, a loaded machine's scheduling).
TEST(TcpTransportTest, ACallThatKeepsMakingProgressStillEndsAtItsDeadline) {
  TcpOptions options;
  options.staging_bytes = 64;  // the sink gets 64 bytes at a time
  auto t = ConnectTcp(2, options);
  ASSERT_TRUE(t[0] != nullptr && t[1] != nullptr);
  std::vector<char> out(64 << 10, 1), in(out.size());
  absl::Status sent;
  std::thread sender([&] { sent = t[1]->SendRecv({0, out.data(), out.size()}, {}, Soon()); });
  auto slow = [](size_t, const void*, size_t) {
    absl::SleepFor(absl::Milliseconds(4));  // the slow reduction under test
  };
  RecvSink sink(slow);
  constexpr absl::Duration kLate = absl::Seconds(2);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(200);
  absl::Status s = t[0]->SendRecv({}, {1, in.data(), in.size(), 1, &sink}, deadline);
  const absl::Duration late = absl::Now() - deadline;
  sender.join();
  EXPECT_TRUE(sent.ok()) << sent;  // it fits in the socket buffers
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("receiving from rank 1"), absl::string_view::npos) << s;
  EXPECT_LT(late, kLate);
}

// A call that sends and receives at once sends no more than send_window_bytes ahead of what
// has arrived: here rank 1 only listens, so rank 0's 1 MiB stops after the window (without
// one it would all fit in the socket buffers and arrive).
TEST(TcpTransportTest, TheSendWindowHoldsSendsToWhatHasArrived) {
  TcpOptions options;
  options.send_window_bytes = 64 << 10;
  auto t = ConnectTcp(2, options);
  ASSERT_TRUE(t[0] != nullptr && t[1] != nullptr);
  std::vector<char> out(1 << 20, 1), in(out.size()), never(16);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  absl::Status sender;
  std::thread rank0([&] {
    sender = t[0]->SendRecv({1, out.data(), out.size()}, {1, never.data(), never.size()}, deadline);
  });
  absl::Status s = t[1]->SendRecv({}, {0, in.data(), in.size()}, deadline);
  rank0.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("(65536/1048576 bytes in"), absl::string_view::npos) << s;
  EXPECT_EQ(sender.code(), absl::StatusCode::kDeadlineExceeded) << sender;
}

// The window never stalls the patterns the algorithms use, however small: a ring where every
// rank sends to its right and receives from its left (messages of different lengths, one
// receive reduced through the staging buffer), and a pair whose receive ends long before its
// send. Every byte arrives in order.
TEST(TcpTransportTest, ATinySendWindowStallsNoRingAndNoUnevenPair) {
  TcpOptions options;
  options.send_window_bytes = 1000;
  options.staging_bytes = 4096;
  constexpr int kRanks = 3;
  auto t = ConnectTcp(kRanks, options);
  for (const auto& r : t) ASSERT_TRUE(r != nullptr);
  auto length = [](int r) { return static_cast<size_t>((1 << 20) + 4 * 7 * r); };
  auto byte = [](int r, size_t i) { return static_cast<char>((i * 31 + r * 7) & 0xff); };
  std::vector<std::vector<char>> out(kRanks), in(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    out[r].resize(length(r));
    for (size_t i = 0; i < out[r].size(); ++i) out[r][i] = byte(r, i);
    in[r].assign(length((r + kRanks - 1) % kRanks), 0);
  }
  std::vector<absl::Status> status(kRanks);
  RunRanks(kRanks, [&](int r) {
    const int right = (r + 1) % kRanks, left = (r + kRanks - 1) % kRanks;
    char* dst = in[r].data();
    auto copy = [dst](size_t offset, const void* data, size_t len) {
      std::memcpy(dst + offset, data, len);
    };
    RecvSink sink(copy);
    RecvSpec recv{left, in[r].data(), in[r].size(), 4, r == 0 ? &sink : nullptr};
    status[r] = t[r]->SendRecv({right, out[r].data(), out[r].size()}, recv, Soon());
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    const int left = (r + kRanks - 1) % kRanks;
    for (size_t i = 0; i < in[r].size(); ++i) {
      ASSERT_EQ(in[r][i], byte(left, i)) << "rank " << r << " byte " << i;
    }
  }
  // Rank 0 sends 1 MiB and receives 10 bytes; rank 1 the other way round.
  std::vector<char> big(1 << 20, 3), big_in(big.size()), small(10, 4), small_in(small.size());
  RunRanks(2, [&](int r) {
    status[r] = r == 0 ? t[0]->SendRecv({1, big.data(), big.size()},
                                        {1, small_in.data(), small_in.size()}, Soon())
                       : t[1]->SendRecv({0, small.data(), small.size()},
                                        {0, big_in.data(), big_in.size()}, Soon());
  });
  ASSERT_TRUE(status[0].ok()) << status[0];
  ASSERT_TRUE(status[1].ok()) << status[1];
  EXPECT_EQ(big_in, big);
  EXPECT_EQ(small_in, small);
}

// Messages shorter than kMinMessageBytes travel padded; both sides must drop the same
// padding, whatever the message is made of (one buffer or pieces, copied or handed to a sink),
// or every later message would be read out of step.
TEST(TcpTransportTest, SmallMessagesOfEveryShapeKeepTheStreamInStep) {
  auto t = ConnectTcp(2, TcpOptions{});
  ASSERT_TRUE(t[0] != nullptr && t[1] != nullptr);
  std::vector<char> big(1 << 20), big_in(big.size());
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 13);
  for (size_t len = 1; len <= 2 * TcpTransport::kMinMessageBytes; len += 7) {
    for (int shape = 0; shape < 3; ++shape) {  // 0: buffers, 1: pieces, 2: into a sink
      std::vector<char> out(len), in(len, 0);
      for (size_t i = 0; i < len; ++i) out[i] = static_cast<char>(len * 31 + i + shape);
      const size_t half = len / 2;
      const BufferPiece out_pieces[2] = {{out.data(), half}, {out.data() + half, len - half}};
      const BufferPiece in_pieces[2] = {{in.data(), half}, {in.data() + half, len - half}};
      char* dst = in.data();
      auto copy = [dst](size_t offset, const void* data, size_t n) {
        std::memcpy(dst + offset, data, n);
      };
      RecvSink sink(copy);
      SendSpec send{1, out.data(), len};
      RecvSpec recv{0, in.data(), len};
      if (shape == 1) {
        send.pieces = out_pieces;
        recv.pieces = in_pieces;
      }
      if (shape == 2) recv.sink = &sink;
      std::vector<absl::Status> status(2);
      // A small message each way, then a large one: it must land where it belongs.
      RunRanks(2, [&](int r) {
        status[r] = r == 0 ? t[0]->SendRecv(send, {}, Soon()) : t[1]->SendRecv({}, recv, Soon());
        if (status[r].ok()) {
          status[r] = r == 0 ? t[0]->SendRecv({1, big.data(), big.size()}, {}, Soon())
                             : t[1]->SendRecv({}, {0, big_in.data(), big_in.size()}, Soon());
        }
      });
      ASSERT_TRUE(status[0].ok()) << status[0];
      ASSERT_TRUE(status[1].ok()) << status[1];
      ASSERT_EQ(in, out) << "length " << len << " shape " << shape;
      ASSERT_EQ(big_in, big) << "after a message of " << len << " bytes, shape " << shape;
      std::fill(big_in.begin(), big_in.end(), 0);
    }
  }
}

TEST(TcpTransportTest, AbortedPeerIsUnavailableNotASlowPeer) {
  auto group = MakeGroup(TransportKind::kTcp, 3);
  ASSERT_TRUE(group.ok()) << group.status();
  (*group)[2]->Abort();
  // Ranks 0 and 1 both learn at once that rank 2 is gone (directly or from each other).
  std::vector<absl::Status> status(2);
  absl::Time start = absl::Now();
  RunRanks(2, [&](int r) {
    std::vector<float> x(1 << 16, 1.0f);
    status[r] = (*group)[r]->AllReduce(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum,
                                       absl::Now() + absl::Seconds(30));
  });
  EXPECT_LT(absl::Now() - start, kFailFastBound) << "a missed failure waits out the 30 s deadline";
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("peer rank"), absl::string_view::npos) << s;
  }
}

// Holds 127.0.0.1:<port> (an ephemeral one, bound with SO_REUSEADDR, never listening) for the
// test, so that the port stays this test's and a fixed-port listener may bind it too.
class ReservedPort {
 public:
  ReservedPort() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const int one = 1;
    setsockopt(fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  int port() const { return port_; }

 private:
  UniqueFd fd_;
  int port_ = 0;
};

// Connects a group of two whose ranks listen on `ports`; returns each rank's published address.
std::vector<std::string> ConnectOnPorts(const std::vector<int>& ports) {
  const int n = static_cast<int>(ports.size());
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  std::vector<std::unique_ptr<TcpTransport>> t(n);
  RunRanks(n, [&](int r) {
    TcpOptions options;
    options.listen_port = ports[r];
    auto connected = TcpTransport::Connect({"s", prefix, r, n}, prefix, &store, options, Soon());
    ASSERT_TRUE(connected.ok()) << connected.status();
    t[r] = std::move(connected).value();
  });
  RunRanks(n, [&](int r) {
    if (t[r] == nullptr) return;
    char out = static_cast<char>(r), in = -1;
    ASSERT_TRUE(t[r]->SendRecv({1 - r, &out, 1}, {1 - r, &in, 1}, Soon()).ok());
    EXPECT_EQ(in, 1 - r);
  });
  std::vector<std::string> addresses;
  for (int r = 0; r < n; ++r) {
    addresses.push_back(*store.Get(absl::StrCat(prefix, "/tcp/", r), Soon()));
  }
  return addresses;
}

TEST(TcpTransportTest, RanksListenOnTheirFixedPortsAndRebindThemAtOnce) {
  ReservedPort a, b;
  const std::vector<std::string> first = ConnectOnPorts({a.port(), b.port()});
  EXPECT_EQ(first[0], absl::StrCat("127.0.0.1:", a.port()));
  EXPECT_EQ(first[1], absl::StrCat("127.0.0.1:", b.port()));
  // The first group's connections linger (TIME_WAIT); the next group binds the same ports.
  const std::vector<std::string> second = ConnectOnPorts({a.port(), b.port()});
  EXPECT_EQ(second, first);
}

TEST(TcpTransportTest, AFixedPortInUseFailsNamingThePortAndWhoChoseIt) {
  auto taken = ListenEphemeral("127.0.0.1", 1);
  ASSERT_TRUE(taken.ok()) << taken.status();
  const std::string port = taken->second.substr(taken->second.rfind(':') + 1);
  InMemoryStore store;
  TcpOptions options;
  ASSERT_TRUE(absl::SimpleAtoi(port, &options.listen_port));
  options.listen_port_origin = "lockstepd --data_port";
  auto connected = TcpTransport::Connect({"s", "p", 0, 2}, "p", &store, options, Soon());
  ASSERT_EQ(connected.status().code(), absl::StatusCode::kFailedPrecondition) << connected.status();
  EXPECT_NE(connected.status().message().find("lockstepd --data_port"), absl::string_view::npos)
      << connected.status();
  EXPECT_NE(connected.status().message().find(absl::StrCat("127.0.0.1:", port)),
            absl::string_view::npos)
      << connected.status();
  EXPECT_NE(connected.status().message().find("in use"), absl::string_view::npos)
      << connected.status();
}

TEST(TcpTransportTest, APortOutsideTheRangeIsRefused) {
  InMemoryStore store;
  TcpOptions options;
  options.listen_port = 70000;
  auto connected = TcpTransport::Connect({"s", "p", 0, 2}, "p", &store, options, Soon());
  EXPECT_EQ(connected.status().code(), absl::StatusCode::kInvalidArgument) << connected.status();
}

TEST(TcpTransportTest, EncryptedGroupsAllReduceAsPlaintextOnes) {
  TcpOptions sealed;
  sealed.encrypt = true;
  // Sizes from one padded element to several frames, odd ones included.
  for (size_t count : {size_t{1}, size_t{1000}, size_t{40000}, size_t{300001}}) {
    std::vector<std::unique_ptr<TcpTransport>> t = ConnectTcp(3, sealed);
    std::vector<std::unique_ptr<Communicator>> comms;
    for (auto& transport : t) {
      auto c = Communicator::Create(std::move(transport), AlgorithmOptions{});
      ASSERT_TRUE(c.ok()) << c.status();
      comms.push_back(std::move(*c));
    }
    std::vector<std::vector<float>> x(3);
    RunRanks(3, [&](int r) {
      x[r].assign(count, static_cast<float>(r + 1));
      ASSERT_TRUE(
          comms[r]
              ->AllReduce(x[r].data(), x[r].data(), count, DType::kF32, ReduceOp::kSum, Soon())
              .ok());
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(x[r], std::vector<float>(count, 6.0f)) << count;
  }
}

TEST(TcpTransportTest, RanksThatDisagreeOnEncryptionRefuseEachOther) {
  InMemoryStore store;
  const std::string prefix = UniquePrefix();
  std::vector<absl::Status> status(2);
  RunRanks(2, [&](int r) {
    TcpOptions options;
    options.encrypt = r == 0;
    status[r] = TcpTransport::Connect({"s", prefix, r, 2}, prefix, &store, options,
                                      absl::Now() + absl::Seconds(2))
                    .status();
  });
  // Rank 0 drops the connection that fails its handshake and waits for rank 1 until its
  // deadline.
  EXPECT_EQ(status[0].code(), absl::StatusCode::kDeadlineExceeded) << status[0];
  EXPECT_NE(status[0].message().find("1 rank(s) did not connect by the deadline"),
            absl::string_view::npos)
      << status[0];
  // Rank 1 connects to rank 0 and finds that rank 0's proof does not check out.
  EXPECT_EQ(status[1].code(), absl::StatusCode::kUnauthenticated) << status[1];
  EXPECT_NE(status[1].message().find("communication.encrypt"), absl::string_view::npos)
      << status[1];
}

// Hands rank 0's address out as the address of a relay that passes every byte between the
// connection and rank 0, except that it flips one bit of what the connector sends after its
// handshake proof (kProofBytes): an attacker on the path between two hosts.
class TamperingStore final : public Store {
 public:
  explicit TamperingStore(std::string prefix) : prefix_(std::move(prefix)) {}
  ~TamperingStore() override {
    if (relay_.joinable()) relay_.join();
  }
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    return inner_.Set(key, value);
  }
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Time deadline) override {
    absl::StatusOr<std::string> value = inner_.Get(key, deadline);
    if (!value.ok() || key != absl::StrCat(prefix_, "/tcp/0")) return value;
    auto listening = ListenEphemeral("127.0.0.1", 1);
    if (!listening.ok()) return listening.status();
    relay_ = std::thread([this, listen = std::move(listening->first), target = *value]() mutable {
      Relay(listen.get(), target);
    });
    return listening->second;
  }
  void Abort() override { inner_.Abort(); }

 private:
  static void Relay(int listen_fd, const std::string& target) {
    UniqueFd from(accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    auto to = ConnectWithRetry(target, Soon());
    if (from.get() < 0 || !to.ok()) return;
    size_t forwarded = 0;  // connector -> acceptor
    char buf[4096];
    while (true) {
      pollfd p[2] = {{from.get(), POLLIN, 0}, {to->get(), POLLIN, 0}};
      if (poll(p, 2, 10000) <= 0) return;
      for (int i = 0; i < 2; ++i) {
        if (p[i].revents == 0) continue;
        const ssize_t k = read(p[i].fd, buf, sizeof(buf));
        if (k <= 0) return;
        if (i == 0) {
          const size_t flip = kProofBytes + 10;
          if (forwarded <= flip && flip < forwarded + k) buf[flip - forwarded] ^= 0x01;
          forwarded += k;
        }
        if (!WriteFull(p[1 - i].fd, buf, k, Soon()).ok()) return;
      }
    }
  }

  const std::string prefix_;
  InMemoryStore inner_;
  std::thread relay_;
};

TEST(TcpTransportTest, ATamperedFrameFailsTheReceiveNamingThePeer) {
  const std::string prefix = UniquePrefix();
  TamperingStore store(prefix);
  TcpOptions sealed;
  sealed.encrypt = true;
  std::vector<std::unique_ptr<TcpTransport>> t(2);
  RunRanks(2, [&](int r) {
    auto connected = TcpTransport::Connect({"s", prefix, r, 2}, prefix, &store, sealed, Soon());
    ASSERT_TRUE(connected.ok()) << connected.status();
    t[r] = std::move(connected).value();
  });
  std::vector<char> out(1000, 'g'), in(1000);
  absl::Status received;
  RunRanks(2, [&](int r) {
    if (r == 1) {
      EXPECT_TRUE(t[1]->SendRecv({0, out.data(), out.size()}, {}, Soon()).ok());
    } else {
      received = t[0]->SendRecv({}, {1, in.data(), in.size()}, Soon());
    }
  });
  EXPECT_EQ(received.code(), absl::StatusCode::kDataLoss) << received;
  EXPECT_NE(received.message().find("from peer rank 1 failed authentication"),
            absl::string_view::npos)
      << received;
  for (auto& transport : t) transport->Abort();
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep

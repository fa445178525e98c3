#include "collectives/transport/tcp/tcp_transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/transport/peer_failure.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/tcp/frame_cipher.h"
#include "collectives/transport/tcp/handshake_acceptor.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace collectives {
namespace {
constexpr int kMaxIov = 64;  // iovecs per sendmsg/recvmsg (the rest go in the next call)
// The urgent byte AbortOnPeerFailure sends: the failed rank, or this for a rank that does
// not fit in a byte (the peer is then named as the cause).
constexpr unsigned char kFailedRankUnknown = 255;

size_t IovBytes(const iovec* iov, size_t n) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += iov[i].iov_len;
  return bytes;
}
}  // namespace

TcpTransport::TcpTransport(int rank, int size, size_t staging_bytes)
    : rank_(rank),
      size_(size),
      send_fd_(size),
      recv_fd_(size),
      staging_(std::max<size_t>(staging_bytes, 64)),
      failed_rank_from_(size, -1) {
  abort_fd_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
}

TcpTransport::~TcpTransport() = default;

void TcpTransport::EnableEncryption() {
  seal_.resize(size_);
  open_.resize(size_);
  seal_buffer_.resize(FrameCipher::kFrameBytes + FrameCipher::kTagBytes);
  open_buffer_.resize(FrameCipher::kFrameBytes + FrameCipher::kTagBytes);
  plain_.resize(FrameCipher::kFrameBytes);
}

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Connect(const HandshakeIdentity& me,
                                                                    const std::string& key_prefix,
                                                                    Store* store,
                                                                    const TcpOptions& options,
                                                                    absl::Time deadline) {
  const int n = me.world_size;
  std::unique_ptr<TcpTransport> t(new TcpTransport(me.rank, n, options.staging_bytes));
  HandshakeIdentity id = me;
  id.encrypt = options.encrypt;
  if (options.encrypt) t->EnableEncryption();
  t->busy_polls_ = options.busy_polls >= 0 ? options.busy_polls : 64;
  t->poll_slice_ms_ = static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(options.poll_slice), 1, std::numeric_limits<int>::max()));
  t->send_window_ = options.send_window_bytes;
  if (n == 1) return t;
  // A deep backlog: connections of a flood wait there until the acceptor sorts them, instead
  // of having their handshakes dropped by the kernel (which retries them only after seconds,
  // a real peer's among them). The kernel caps it at net.core.somaxconn.
  auto listened = Listen(options.listen_host, options.listen_port, n + 256);
  if (!listened.ok()) {
    return Annotate(listened.status(),
                    absl::StrCat("rank ", me.rank, ": the data port",
                                 options.listen_port_origin.empty()
                                     ? std::string()
                                     : absl::StrCat(" (", options.listen_port_origin, ")")));
  }
  auto listening = std::move(*listened);
  UniqueFd listen_fd = std::move(listening.first);
  LS_RETURN_IF_ERROR(store->Set(absl::StrCat(key_prefix, "/tcp/", me.rank), listening.second));

  // Two connections per pair, one per direction: rank r sends to p only on
  // the connection r opened to p and receives from p only on the one p
  // opened. Measured, all-reduce n=2 (bench/allreduce, 6 interleaved runs,
  // rank 0's medians; small messages padded, cubic), two connections vs one:
  // 64 KiB 19.5 vs 22.1 us, 128 KiB 32.6 vs 37.7, 256 KiB 47.7 vs 59.7, 512
  // KiB 87.7 vs 91.7, 1 MiB 173 vs 185 (recursive doubling: one exchange of
  // the whole vector each way); the ring sizes are within a few percent the
  // other way: 2 MiB 303 vs 297, 4 MiB 635 vs 595, 8 MiB 1701 vs 1661. A raw
  // 1 MiB exchange alone measures the same either way under cubic
  // (bench/tcp_loopback_probe --connections=split|shared: 138-194 vs 130-135
  // us); under BBR, the hosts' default, one connection is about 2x slower
  // (163-236 vs 278-283 us).
  // Order, free of deadlock: connect to every lower rank, accept from every
  // peer, then connect to every higher rank. Rank 0 accepts at once; a
  // rank's connects to lower ranks find them accepting (they connected to
  // their own lower ranks first), and its connects to higher ones come after
  // its accepts, which the higher ranks' first connects completed.
  auto connect_to = [&](int peer) -> absl::Status {
    LS_ASSIGN_OR_RETURN(std::string address,
                        store->Get(absl::StrCat(key_prefix, "/tcp/", peer), deadline));
    LS_ASSIGN_OR_RETURN(UniqueFd fd, ConnectWithRetry(address, deadline));
    TuneSocket(fd.get(), options.socket_buffer_bytes, options.congestion_control);
    absl::StatusOr<HandshakeNonces> nonces = HandshakeAsConnector(fd.get(), id, peer, deadline);
    if (!nonces.ok()) {
      return Annotate(nonces.status(), absl::StrCat("rank ", me.rank, " connecting to rank ", peer,
                                                    " at ", address));
    }
    if (id.encrypt) {
      LS_ASSIGN_OR_RETURN(t->seal_[peer], FrameCipher::Create(id, *nonces, me.rank, peer));
    }
    t->send_fd_[peer] = std::move(fd);
    return absl::OkStatus();
  };
  for (int peer = 0; peer < me.rank; ++peer) LS_RETURN_IF_ERROR(connect_to(peer));
  // Accept every other rank. Refused connections are logged and do not
  // count.
  LS_RETURN_IF_ERROR(
      t->AcceptPeers(listen_fd.get(), listening.second, id, key_prefix, options, deadline));
  for (int peer = me.rank + 1; peer < n; ++peer) LS_RETURN_IF_ERROR(connect_to(peer));
  for (int r = 0; r < n; ++r) {
    if (r == me.rank) continue;
    LS_RETURN_IF_ERROR(SetNonBlocking(t->send_fd_[r].get()));
    LS_RETURN_IF_ERROR(SetNonBlocking(t->recv_fd_[r].get()));
  }
  return t;
}

absl::Status TcpTransport::AcceptPeers(int listen_fd, const std::string& address,
                                       const HandshakeIdentity& me, const std::string& key_prefix,
                                       const TcpOptions& options, absl::Time deadline) {
  // One poll() loop on this thread proves every connection (handshake_acceptor.h): a
  // connection that never answers (a port scanner, a stuck peer of another group, a flood)
  // holds a descriptor for at most handshake_timeout, never a thread, and never the real
  // peers behind it.
  HandshakeAcceptorOptions accept_options;
  accept_options.max_pending = options.max_pending_handshakes;
  accept_options.handshake_timeout = options.handshake_timeout;
  accept_options.who = absl::StrCat("rank ", rank_, " (", key_prefix, ")");
  int missing = size_ - 1;
  absl::Status accepted = AcceptHandshakes(
      listen_fd, me, accept_options, missing, deadline,
      [&](UniqueFd& fd, const AcceptedPeer& peer) -> absl::StatusOr<bool> {
        if (peer.rank < 0 || peer.rank >= size_ || peer.rank == rank_ ||
            recv_fd_[peer.rank].get() >= 0) {
          spdlog::warn(
              "collectives: rank {} ({}) refused a connection: unexpected or duplicate "
              "rank {}",
              rank_, key_prefix, peer.rank);
          return false;
        }
        if (me.encrypt) {
          LS_ASSIGN_OR_RETURN(open_[peer.rank],
                              FrameCipher::Create(me, peer.nonces, peer.rank, rank_));
        }
        TuneSocket(fd.get(), options.socket_buffer_bytes, options.congestion_control);
        recv_fd_[peer.rank] = std::move(fd);
        --missing;
        return true;
      });
  if (absl::IsDeadlineExceeded(accepted)) {
    return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": ", missing,
                                                    " rank(s) did not connect by the deadline; "
                                                    "are they started, and can they reach ",
                                                    address, "?"));
  }
  return accepted;
}

void TcpTransport::Abort() {
  aborted_.store(true);
  uint64_t one = 1;
  (void)!write(abort_fd_.get(), &one, sizeof(one));
  for (const auto* fds : {&send_fd_, &recv_fd_}) {
    for (const UniqueFd& fd : *fds) {
      if (fd.get() >= 0) shutdown(fd.get(), SHUT_RDWR);
    }
  }
}

void TcpTransport::AbortOnPeerFailure(int failed_rank) {
  const unsigned char cause = failed_rank >= 0 && failed_rank < kFailedRankUnknown
                                  ? static_cast<unsigned char>(failed_rank)
                                  : kFailedRankUnknown;
  // One in-band pad byte, then the urgent byte (with MSG_OOB the last byte of a send is the
  // urgent one; one send, so both travel in one segment). A read stops short in front of an
  // urgent mark only when it has copied something, so the pad makes the peer's next read
  // stop at the mark even when this rank left at a message boundary, and the peer's
  // short-read check takes the byte (TakeUrgentByte); without it that read would step over
  // the mark and the kernel would drop the byte. The pad lands only in a collective that
  // fails anyway (this rank sends nothing after it): in a reduction it stays a partial
  // element in staging, never reduced.
  const unsigned char message[2] = {0, cause};
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || r == failed_rank || send_fd_[r].get() < 0) continue;
    // Best effort: with the send buffer full nothing can be queued, and the peer then names
    // this rank.
    (void)::send(send_fd_[r].get(), message, sizeof(message),
                 MSG_OOB | MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  Abort();
}

void TcpTransport::TakeUrgentByte(int peer) {
  const int fd = recv_fd_[peer].get();
  unsigned char byte;
  if (sockatmark(fd) == 1 && ::recv(fd, &byte, 1, MSG_OOB | MSG_DONTWAIT) == 1) {
    failed_rank_from_[peer] = byte;
  }
}

int TcpTransport::FailedRankToldBy(int peer) const {
  auto told = [this](int r) {
    int cause = failed_rank_from_[r];
    unsigned char byte;
    if (cause < 0 && recv_fd_[r].get() >= 0 &&
        ::recv(recv_fd_[r].get(), &byte, 1, MSG_OOB | MSG_DONTWAIT) == 1) {
      cause = byte;
    }
    return cause >= 0 && cause != kFailedRankUnknown && cause < size_ ? cause : -1;
  };
  // The urgent byte arrives before the connection's end: taken at its mark by a short read
  // (the pad byte in front of it makes one stop there), or still pending when this rank has
  // not read that far. `peer` may have had no room to queue it (a full send buffer), so then
  // ask the other peers: every rank that leaves because of a failure tells every peer.
  const int cause = told(peer);
  if (cause >= 0) return cause;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || r == peer) continue;
    const int other = told(r);
    if (other >= 0) return other;
  }
  return -1;
}

absl::Status TcpTransport::PeerError(int peer, const char* what, int err) const {
  if (aborted_.load()) return absl::AbortedError(absl::StrCat("rank ", rank_, " aborted"));
  const int cause = FailedRankToldBy(peer);
  if (cause >= 0 && cause != peer) return RelayedPeerFailure(rank_, peer, cause, what);
  return PeerFailure(peer, absl::StrCat("rank ", rank_, ": ", what, " peer rank ", peer,
                                        err != 0 ? absl::StrCat(" failed: ", std::strerror(err))
                                                 : std::string(": the connection closed"),
                                        "; did it exit, crash or abort? Check its logs"));
}

absl::Status TcpTransport::SendRecv(const SendSpec& send, const RecvSpec& recv,
                                    absl::Time deadline) {
  const bool small_send = send.peer != kNoPeer && send.len > 0 && send.len < kMinMessageBytes;
  const bool small_recv = recv.peer != kNoPeer && recv.len > 0 && recv.len < kMinMessageBytes;
  if (!small_send && !small_recv) return Move(send, recv, deadline);
  // Both sides know every message's length, so both pad the same messages.
  alignas(64) char out[kMinMessageBytes] = {};
  alignas(64) char in[kMinMessageBytes];
  SendSpec padded_send = send;
  RecvSpec padded_recv = recv;
  if (small_send) {
    PieceCursor(send).CopyOut(out, send.len);
    padded_send = SendSpec{send.peer, out, kMinMessageBytes};
  }
  if (small_recv) padded_recv = RecvSpec{recv.peer, in, kMinMessageBytes};
  LS_RETURN_IF_ERROR(Move(padded_send, padded_recv, deadline));
  if (small_recv) {
    if (recv.sink != nullptr) {
      (*recv.sink)(0, in, recv.len);
    } else {
      PieceCursor(recv).CopyIn(in, recv.len);
    }
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::Move(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) {
  if (aborted_.load()) return absl::AbortedError(absl::StrCat("rank ", rank_, " aborted"));
  if (!seal_.empty()) return MoveSealed(send, recv, deadline);
  const bool sending = send.peer != kNoPeer && send.len > 0;
  const bool receiving = recv.peer != kNoPeer && recv.len > 0;
  const int sfd = sending ? send_fd_[send.peer].get() : -1;
  const int rfd = receiving ? recv_fd_[recv.peer].get() : -1;
  PieceCursor out(send), in(recv);
  iovec iov[kMaxIov];
  size_t sent = 0, received = 0, staged = 0;
  const size_t align = std::max<size_t>(recv.align, 1);
  Round round;
  auto deadline_passed = [&] { return DeadlinePassed(send, recv, sent, received, ""); };

  // Bytes this call may send now: all that is left, or while it still receives, no more than
  // send_window_ ahead of what has arrived (TcpOptions::send_window_bytes). Free of deadlock:
  // ranks blocked on their windows in a cycle would each have sent send_window_ more than its
  // predecessor, which no cycle allows; a rank whose receive is done sends freely.
  auto may_send = [&]() -> size_t {
    if (!sending || sent >= send.len) return 0;
    const size_t left = send.len - sent;
    if (send_window_ == 0 || !receiving || received >= recv.len) return left;
    const size_t limit = received + staged + send_window_;
    return limit > sent ? std::min(left, limit - sent) : 0;
  };
  while ((sending && sent < send.len) || (receiving && received < recv.len)) {
    bool progress = false;
    if (const size_t allowed = may_send(); allowed > 0) {
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = out.Fill(iov, kMaxIov, allowed);
      ssize_t k = ::sendmsg(sfd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        sent += k;
        out.Advance(k);
        progress = true;
      } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
        return PeerError(send.peer, "sending to", errno);
      }
    }
    if (receiving && received < recv.len) {
      ssize_t k;
      if (recv.sink == nullptr) {
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = in.Fill(iov, kMaxIov, recv.len - received);
        const size_t want = IovBytes(iov, m.msg_iovlen);
        k = ::recvmsg(rfd, &m, MSG_DONTWAIT);
        if (k > 0) {
          received += k;
          in.Advance(k);
          if (static_cast<size_t>(k) < want) TakeUrgentByte(recv.peer);
        }
      } else {
        // Reductions read whole elements: keep a partial element for the next round.
        size_t want = std::min(staging_.size() - staged, recv.len - received - staged);
        k = ::recv(rfd, staging_.data() + staged, want, MSG_DONTWAIT);
        if (k > 0) {
          if (static_cast<size_t>(k) < want) TakeUrgentByte(recv.peer);
          staged += k;
          size_t ready = staged / align * align;
          if (ready > 0) {
            (*recv.sink)(received, staging_.data(), ready);
            received += ready;
            staged -= ready;
            if (staged > 0) std::memmove(staging_.data(), staging_.data() + ready, staged);
          }
        }
      }
      if (k > 0) {
        progress = true;
      } else if (k == 0) {
        return PeerError(recv.peer, "receiving from", 0);
      } else if (errno != EAGAIN && errno != EINTR) {
        return PeerError(recv.peer, "receiving from", errno);
      }
    }
    LS_RETURN_IF_ERROR(EndRound(progress, sending && sent < send.len ? sfd : -1, may_send() > 0,
                                send.peer, receiving && received < recv.len ? rfd : -1, deadline,
                                &round, deadline_passed));
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::DeadlinePassed(const SendSpec& send, const RecvSpec& recv, size_t sent,
                                          size_t received, absl::string_view how) const {
  const bool receiving = recv.peer != kNoPeer && received < recv.len;
  return absl::DeadlineExceededError(
      absl::StrCat("rank ", rank_, ": deadline passed ",
                   receiving ? absl::StrCat("receiving from rank ", recv.peer)
                             : absl::StrCat("sending to rank ", send.peer),
                   " (", received, "/", recv.len, " bytes in, ", sent, "/", send.len, " out", how,
                   "); is that rank stopped or overloaded?"));
}

absl::Status TcpTransport::EndRound(bool progress, int sfd, bool want_room, int send_peer, int rfd,
                                    absl::Time deadline, Round* round,
                                    absl::FunctionRef<absl::Status()> deadline_passed) {
  if (progress) {
    round->idle = 0;
    // A peer that keeps bytes trickling in never lets poll() time out: look at the clock
    // every 64 rounds that moved bytes too (a clock read is ~20 ns, a round two syscalls).
    if (++round->busy_rounds % 64 == 0 && absl::Now() >= deadline) return deadline_passed();
    return absl::OkStatus();
  }
  if (++round->idle <= busy_polls_) {
    // Yield rather than spin: if the peer shares this core, it runs now.
    sched_yield();
    return absl::OkStatus();
  }
  pollfd fds[3];
  int nfds = 0;
  // POLLRDHUP: a peer we still send to has shut its connection down (it left the group),
  // which a full send buffer would otherwise hide until the deadline. Never a normal end:
  // a peer finishes only after it has received everything we send it. Held back by the
  // window, this rank waits for bytes to arrive, not for room to send.
  if (sfd >= 0) fds[nfds++] = {sfd, static_cast<short>((want_room ? POLLOUT : 0) | POLLRDHUP), 0};
  if (rfd >= 0) fds[nfds++] = {rfd, POLLIN, 0};
  fds[nfds++] = {abort_fd_.get(), POLLIN, 0};
  const int rc = poll(fds, nfds, PollTimeoutMs(deadline, poll_slice_ms_));
  if (aborted_.load()) return absl::AbortedError(absl::StrCat("rank ", rank_, " aborted"));
  if (rc > 0 && sfd >= 0 && (fds[0].revents & POLLRDHUP) != 0) {
    return PeerError(send_peer, "sending to", 0);
  }
  // Whatever woke poll() (a timeout, or a peer's next few bytes), the deadline holds.
  if (absl::Now() >= deadline) return deadline_passed();
  return absl::OkStatus();
}

absl::Status TcpTransport::MoveSealed(const SendSpec& send, const RecvSpec& recv,
                                      absl::Time deadline) {
  constexpr size_t kTag = FrameCipher::kTagBytes;
  const bool sending = send.peer != kNoPeer && send.len > 0;
  const bool receiving = recv.peer != kNoPeer && recv.len > 0;
  const int sfd = sending ? send_fd_[send.peer].get() : -1;
  const int rfd = receiving ? recv_fd_[recv.peer].get() : -1;
  PieceCursor out(send), in(recv);
  size_t sealed = 0;                     // plaintext bytes sealed into frames
  size_t frame_bytes = 0, frame_at = 0;  // the frame in seal_buffer_ (with its tag), bytes sent
  size_t received = 0;                   // plaintext bytes opened and delivered
  size_t have = 0;                       // bytes of the incoming frame in open_buffer_
  Round round;
  auto deadline_passed = [&] {
    return DeadlinePassed(send, recv, sealed, received, ", encrypted");
  };
  auto send_pending = [&] { return sending && (sealed < send.len || frame_at < frame_bytes); };
  while (send_pending() || (receiving && received < recv.len)) {
    bool progress = false;
    if (sending && frame_at == frame_bytes && sealed < send.len) {
      const size_t n = std::min(FrameCipher::kFrameBytes, send.len - sealed);
      LS_RETURN_IF_ERROR(seal_[send.peer]->Seal(out, n, seal_buffer_.data()));
      sealed += n;
      frame_bytes = n + kTag;
      frame_at = 0;
    }
    if (frame_at < frame_bytes) {
      const ssize_t k = ::send(sfd, seal_buffer_.data() + frame_at, frame_bytes - frame_at,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        frame_at += k;
        progress = true;
      } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
        return PeerError(send.peer, "sending to", errno);
      }
    }
    if (receiving && received < recv.len) {
      const size_t n = std::min(FrameCipher::kFrameBytes, recv.len - received);
      const size_t want = n + kTag - have;
      const ssize_t k = ::recv(rfd, open_buffer_.data() + have, want, MSG_DONTWAIT);
      if (k > 0) {
        progress = true;
        if (static_cast<size_t>(k) < want) TakeUrgentByte(recv.peer);
        have += k;
        if (have == n + kTag) {
          LS_RETURN_IF_ERROR(OpenFrame(recv, received, n, in));
          received += n;
          have = 0;
        }
      } else if (k == 0) {
        return PeerError(recv.peer, "receiving from", 0);
      } else if (errno != EAGAIN && errno != EINTR) {
        return PeerError(recv.peer, "receiving from", errno);
      }
    }
    LS_RETURN_IF_ERROR(EndRound(progress, send_pending() ? sfd : -1, frame_at < frame_bytes,
                                send.peer, receiving && received < recv.len ? rfd : -1, deadline,
                                &round, deadline_passed));
  }
  return absl::OkStatus();
}

absl::Status TcpTransport::OpenFrame(const RecvSpec& recv, size_t offset, size_t n,
                                     PieceCursor& in) {
  const unsigned char* frame = open_buffer_.data();
  bool ok;
  if (recv.sink == nullptr) {
    ok = open_[recv.peer]->Open(frame, n, in);
  } else {
    // Reductions read the frame once it checked out, whole elements (frames are a multiple of
    // every element size, and a message is a whole number of elements).
    PieceCursor plain(plain_.data(), n, {});
    ok = open_[recv.peer]->Open(frame, n, plain);
    if (ok) (*recv.sink)(offset, plain_.data(), n);
  }
  if (ok) return absl::OkStatus();
  // A peer that left because of another rank's failure sends a pad byte into the stream
  // (AbortOnPeerFailure); that is its news, not tampering.
  if (FailedRankToldBy(recv.peer) >= 0) return PeerError(recv.peer, "receiving from", 0);
  return absl::DataLossError(absl::StrCat(
      "rank ", rank_, ": an encrypted frame from peer rank ", recv.peer,
      " failed authentication (AES-256-GCM tag) at byte ", offset,
      " of a message: its bytes were changed, dropped or replayed between the hosts; check the "
      "network path to that rank's host (communication.encrypt)"));
}

}  // namespace collectives
}  // namespace lockstep

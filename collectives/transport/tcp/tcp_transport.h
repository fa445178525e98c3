// TcpTransport: a full mesh of authenticated TCP connections, two per pair of ranks, one for
// each direction.
//
// Connect(): every rank listens on `listen_host` (an ephemeral port unless TcpOptions::
// listen_port fixes one) and publishes
// "<prefix>/tcp/<rank>" in the Store; it opens one connection to every other rank, on which it
// only sends, and accepts one from every other rank, on which it only receives (the .cc says
// why, and in which order, free of deadlock). Each connection passes the HMAC handshake
// (tcp_handshake.h) first; a stray connection, a wrong secret or a duplicate rank is logged
// and closed, and accepting goes on. Connections are proved on the connecting thread, by one
// poll() loop (handshake_acceptor.h): at most max_pending_handshakes at once, each for at most
// handshake_timeout, none on a thread of its own.
// Data path: non-blocking sockets, TCP_NODELAY, one poll() over the send and receive
// sockets plus an eventfd for Abort(); received bytes for reductions go through one staging
// buffer allocated at connect time (no allocation per message).
// Ownership: owns its sockets. Thread model: see Transport; Abort() shuts every socket down,
// so peers see this rank leave at once (UNAVAILABLE) instead of waiting for a deadline; a
// rank that leaves because another failed says which one first (AbortOnPeerFailure).
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_TCP_TRANSPORT_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_TCP_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "collectives/store.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/tcp/frame_cipher.h"
#include "collectives/transport/tcp/socket_util.h"
#include "collectives/transport/tcp/tcp_handshake.h"
#include "collectives/transport/transport.h"

namespace lockstep {
namespace collectives {

struct TcpOptions {
  std::string listen_host = "127.0.0.1";
  // The port this rank listens on while the group connects; 0: an ephemeral one. A fixed
  // port (a firewall's declared data port) is bound with SO_REUSEADDR, so the next attempt
  // of a job rebinds it at once; the listener closes once every peer connected.
  int listen_port = 0;
  // What chose listen_port, named when the port is taken (e.g. "lockstepd --data_port").
  std::string listen_port_origin;
  // SO_SNDBUF/SO_RCVBUF (the kernel caps them at net.core.[rw]mem_max); 0 keeps Linux's
  // autotuning, which measured slower at every size (bench/transport_tuning.md).
  int socket_buffer_bytes = 4 << 20;
  size_t staging_bytes = 256 << 10;
  // Congestion control, the first of these the kernel lets us set (TuneSocket); empty: the
  // system's default. Not BBR (these machines' default): it paces every connection with a
  // timer when the interface has no fq qdisc (loopback never has one), and its bandwidth
  // estimate swings from run to run. Cubic (Linux's usual default, better than reno on long
  // fat links between hosts), else reno, which every kernel lets unprivileged processes set.
  // Measured: bench/transport_tuning.md.
  std::string congestion_control = "cubic,reno";
  // Non-blocking attempts (each after a sched_yield) before sleeping in poll(); -1: 64.
  // Also when ranks outnumber cores: the yield hands the core to a rank that can make
  // progress, and sleeping costs a wake-up per segment (bench/transport_tuning.md).
  int busy_polls = -1;
  // In a SendRecv that sends and receives at once, send at most this many bytes ahead of what
  // has arrived; 0: no limit. It bounds the bytes in flight (and so the socket buffers' share
  // of the caches) without stopping the exchange at every segment; 2 MiB leaves a 4 MiB
  // all-reduce of two ranks (2 MiB each way per ring step) unbounded. Measured:
  // bench/transport_tuning.md.
  size_t send_window_bytes = 2 << 20;
  // Encrypt and authenticate every byte (AES-256-GCM, frame_cipher.h), with a key per
  // connection; every rank of the group must agree (the handshake checks it).
  bool encrypt = false;
  // How long one incoming connection may take to finish its handshake (from its accept).
  absl::Duration handshake_timeout = absl::Seconds(5);
  // Incoming connections proving themselves at once; at the cap a new one evicts the oldest
  // (handshake_acceptor.h). None costs a thread.
  int max_pending_handshakes = 64;
  // The longest a call waiting for a peer sleeps in one poll() before it looks at its deadline
  // again. Abort(), a peer's bytes and a peer's hang-up wake it at once, so the slice only
  // bounds how late a wake-up that never comes is noticed; tests lengthen it to hours, which
  // turns such a lost wake-up into a wait until the call's deadline that they can see.
  absl::Duration poll_slice = absl::Seconds(1);
};

class TcpTransport final : public Transport {
 public:
  // Messages shorter than this travel padded to it (the receiver drops the padding). A
  // message of a few bytes leaves a loopback connection slow for the bulk transfers after
  // it: barriers (1 byte) and small all-reduces otherwise slow the next large all-reduce by
  // about 2x (bench/transport_tuning.md).
  static constexpr size_t kMinMessageBytes = 64;

  static absl::StatusOr<std::unique_ptr<TcpTransport>> Connect(const HandshakeIdentity& me,
                                                               const std::string& key_prefix,
                                                               Store* store,
                                                               const TcpOptions& options,
                                                               absl::Time deadline);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status SendRecv(const SendSpec& send, const RecvSpec& recv, absl::Time deadline) override;
  void Abort() override;
  // Sends each live peer one urgent (out-of-band) byte holding `failed_rank` before shutting
  // the connections down; a peer that finds this connection closed reads it (PeerError).
  // Urgent data skips the peer's in-band stream, so it cannot be mistaken for a tensor
  // (one in-band pad byte goes in front of it, see the .cc).
  void AbortOnPeerFailure(int failed_rank) override;

 private:
  TcpTransport(int rank, int size, size_t staging_bytes);
  // Connect(): accepts a connection from every other rank on `listen_fd` (published as
  // `address`), each proven by the handshake, into recv_fd_; refused connections are logged
  // and closed.
  absl::Status AcceptPeers(int listen_fd, const std::string& address, const HandshakeIdentity& me,
                           const std::string& key_prefix, const TcpOptions& options,
                           absl::Time deadline);
  // SendRecv without the padding of small messages (kMinMessageBytes).
  absl::Status Move(const SendSpec& send, const RecvSpec& recv, absl::Time deadline);
  // Move with TcpOptions::encrypt: frames sealed and opened by FrameCipher.
  absl::Status MoveSealed(const SendSpec& send, const RecvSpec& recv, absl::Time deadline);
  // Opens the frame of `n` plaintext bytes in open_buffer_, the message's bytes from
  // `offset`, into `in` or recv.sink. DATA_LOSS naming the peer when its tag fails.
  absl::Status OpenFrame(const RecvSpec& recv, size_t offset, size_t n, PieceCursor& in);
  // The end of one round of Move's loop: with `progress`, a look at the clock every 64 rounds;
  // without, a yield for the first busy_polls_ rounds, then poll() on `sfd` (-1: done
  // sending; for room when `want_room`) and `rfd` (-1: done receiving) until one is ready,
  // Abort() or the deadline. OK to go on, else ABORTED, the send peer's failure, or
  // deadline_passed().
  struct Round {
    int idle = 0;
    unsigned busy_rounds = 0;
  };
  absl::Status EndRound(bool progress, int sfd, bool want_room, int send_peer, int rfd,
                        absl::Time deadline, Round* round,
                        absl::FunctionRef<absl::Status()> deadline_passed);
  // DEADLINE_EXCEEDED for a Move that had `sent` and `received` bytes of its messages done;
  // `how` follows the byte counts (", encrypted").
  absl::Status DeadlinePassed(const SendSpec& send, const RecvSpec& recv, size_t sent,
                              size_t received, absl::string_view how) const;
  // Sizes the ciphers and frame buffers (Connect, with TcpOptions::encrypt).
  void EnableEncryption();
  // UNAVAILABLE: the connection to `peer` failed (errno `err`) or closed (err == 0), naming
  // the rank the failure started at when `peer` told us (AbortOnPeerFailure).
  absl::Status PeerError(int peer, const char* what, int err) const;
  // After a read from `peer` that stopped short: if it stopped at an urgent mark, takes the
  // urgent byte (AbortOnPeerFailure) into failed_rank_from_ now, before the next read steps
  // over the mark and the kernel drops the byte. A read stops short of a mark only in front of
  // it, so checking after short reads catches every mark; sockatmark costs as much as one
  // empty recv (about 0.3 us here), and a short read means we wait for data anyway.
  void TakeUrgentByte(int peer);
  // The rank a failure started at as told by `peer`'s urgent byte, else by any other peer's
  // (see the .cc); -1 when none said. Reads pending urgent bytes: the failure path only.
  int FailedRankToldBy(int peer) const;

  const int rank_;
  const int size_;
  // send_fd_[r]: the connection this rank opened to r, which carries only what it sends r;
  // recv_fd_[r]: the one r opened, which carries only what r sends. Empty for this rank.
  std::vector<UniqueFd> send_fd_;
  std::vector<UniqueFd> recv_fd_;
  UniqueFd abort_fd_;  // eventfd, readable after Abort()
  std::atomic<bool> aborted_{false};
  std::vector<char> staging_;
  // failed_rank_from_[r]: the urgent byte rank r sent before it left (TakeUrgentByte), or -1.
  std::vector<int> failed_rank_from_;
  int busy_polls_ = 0;
  int poll_slice_ms_ = 1000;  // TcpOptions::poll_slice
  size_t send_window_ = 0;    // TcpOptions::send_window_bytes
  // TcpOptions::encrypt: seal_[r] encrypts what goes to r, open_[r] decrypts what r sent
  // (empty vectors: plaintext); the frame being sent, the frame being received, and an
  // opened frame for reductions.
  std::vector<std::unique_ptr<FrameCipher>> seal_;
  std::vector<std::unique_ptr<FrameCipher>> open_;
  std::vector<unsigned char> seal_buffer_;
  std::vector<unsigned char> open_buffer_;
  std::vector<char> plain_;
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_TCP_TRANSPORT_H_

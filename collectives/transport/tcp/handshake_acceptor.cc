#include "collectives/transport/tcp/handshake_acceptor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/secure_random.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace collectives {
namespace {

// Refusals logged one by one before they are only counted.
constexpr int kLoggedRefusals = 8;
// Connections taken from the backlog per round of the loop, so pending ones are served too.
constexpr int kAcceptsPerRound = 64;

enum class Phase { kSendingHello, kReadingProof, kSendingAnswer };

// One connection that has not proved itself yet.
struct Pending {
  UniqueFd fd;
  absl::Time until;  // accept + handshake_timeout
  Phase phase = Phase::kSendingHello;
  HandshakeNonce nonce_a{};
  std::string out;  // the hello, then the answer
  size_t out_at = 0;
  std::string in;  // the proof as it arrives
  ProvenPeer proven;
};

// What advancing a connection came to.
enum class Step { kWaiting, kProven, kClosed };

class Acceptor {
 public:
  Acceptor(int listen_fd, const HandshakeIdentity& me, const HandshakeAcceptorOptions& options)
      : listen_fd_(listen_fd), me_(me), options_(options) {}
  ~Acceptor() {
    if (refused_ > kLoggedRefusals) {
      spdlog::warn(
          "collectives: {} refused {} connection(s) in all ({} cut at the handshake "
          "deadline, {} evicted by newer ones at the cap of {})",
          options_.who, refused_, timed_out_, evicted_, options_.max_pending);
    }
  }

  absl::Status Run(int wanted, absl::Time deadline, const ProvenPeerFn& on_peer) {
    int taken = 0;
    std::vector<pollfd> fds;
    while (taken < wanted) {
      const absl::Time now = absl::Now();
      if (now >= deadline) return absl::DeadlineExceededError("the connect deadline passed");
      // Time is up for the connections that have not proved themselves.
      absl::Time wake = deadline;
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (now >= it->until) {
          ++timed_out_;
          Refuse(absl::StrCat("it did not finish the handshake within ",
                              absl::FormatDuration(options_.handshake_timeout)));
          it = pending_.erase(it);
          continue;
        }
        wake = std::min(wake, it->until);
        ++it;
      }
      fds.clear();
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const Pending& p : pending_) {
        fds.push_back(
            {p.fd.get(), p.phase == Phase::kReadingProof ? short{POLLIN} : short{POLLOUT}, 0});
      }
      if (poll(fds.data(), fds.size(), PollTimeoutMs(wake, 1000)) < 0 && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
      }
      // The pending connections first (fds[1..] follow pending_'s order), then new ones.
      size_t k = 1;
      for (auto it = pending_.begin(); it != pending_.end(); ++k) {
        if (k >= fds.size() || fds[k].revents == 0) {
          ++it;
          continue;
        }
        const Step step = Advance(*it);
        if (step == Step::kWaiting) {
          ++it;
          continue;
        }
        if (step == Step::kProven) {
          AcceptedPeer peer{it->proven.rank, HandshakeNonces{it->nonce_a, it->proven.nonce_c}};
          LS_ASSIGN_OR_RETURN(const bool took, on_peer(it->fd, peer));
          if (took) ++taken;
        }
        it = pending_.erase(it);  // closes what on_peer did not take
      }
      if (fds[0].revents != 0) LS_RETURN_IF_ERROR(AcceptNew());
    }
    return absl::OkStatus();
  }

 private:
  absl::Status AcceptNew() {
    for (int i = 0; i < kAcceptsPerRound; ++i) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
          return absl::OkStatus();
        }
        // Out of descriptors (EMFILE, ENFILE) or memory: the pending ones may still finish.
        spdlog::warn("collectives: {}: accept: {}", options_.who, std::strerror(errno));
        return absl::OkStatus();
      }
      if (static_cast<int>(pending_.size()) >= options_.max_pending) {
        ++evicted_;
        Refuse(absl::StrCat(options_.max_pending,
                            " connections were proving themselves; the oldest was closed"));
        pending_.pop_front();
      }
      Pending& p = pending_.emplace_back();
      p.fd = UniqueFd(fd);
      p.until = absl::Now() + options_.handshake_timeout;
      SecureRandomBytes(p.nonce_a.data(), p.nonce_a.size());
      p.out = EncodeHello(p.nonce_a);
      if (Advance(p) == Step::kClosed) pending_.pop_back();
    }
    return absl::OkStatus();
  }

  // Moves `p` as far as its socket allows.
  Step Advance(Pending& p) {
    while (true) {
      if (p.phase == Phase::kReadingProof) {
        char buf[kProofBytes];
        const ssize_t n = ::recv(p.fd.get(), buf, kProofBytes - p.in.size(), 0);
        if (n == 0) return Close("it closed before proving itself");
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Step::kWaiting;
          return Close(absl::StrCat("reading its proof: ", std::strerror(errno)));
        }
        p.in.append(buf, static_cast<size_t>(n));
        if (p.in.size() < kProofBytes) continue;
        absl::StatusOr<ProvenPeer> proven = CheckProof(p.in, me_, p.nonce_a);
        if (!proven.ok()) return Close(std::string(proven.status().message()));
        p.proven = *proven;
        p.out = EncodeAnswer(me_, p.proven.nonce_c, p.nonce_a);
        p.out_at = 0;
        p.phase = Phase::kSendingAnswer;
        continue;
      }
      const ssize_t n =
          ::send(p.fd.get(), p.out.data() + p.out_at, p.out.size() - p.out_at, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Step::kWaiting;
        return Close(absl::StrCat("writing to it: ", std::strerror(errno)));
      }
      p.out_at += static_cast<size_t>(n);
      if (p.out_at < p.out.size()) continue;
      if (p.phase == Phase::kSendingAnswer) return Step::kProven;
      p.phase = Phase::kReadingProof;
    }
  }

  Step Close(const std::string& why) {
    Refuse(why);
    return Step::kClosed;
  }

  void Refuse(const std::string& why) {
    if (++refused_ <= kLoggedRefusals) {
      spdlog::warn("collectives: {} refused a connection: {}", options_.who, why);
    }
  }

  const int listen_fd_;
  const HandshakeIdentity& me_;
  const HandshakeAcceptorOptions& options_;
  std::list<Pending> pending_;  // oldest first
  int refused_ = 0;
  int timed_out_ = 0;
  int evicted_ = 0;
};

}  // namespace

absl::Status AcceptHandshakes(int listen_fd, const HandshakeIdentity& me,
                              const HandshakeAcceptorOptions& options, int wanted,
                              absl::Time deadline, const ProvenPeerFn& on_peer) {
  if (options.max_pending < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pending_handshakes ", options.max_pending, "; it must be at least 1"));
  }
  LS_RETURN_IF_ERROR(SetNonBlocking(listen_fd));
  Acceptor acceptor(listen_fd, me, options);
  return acceptor.Run(wanted, deadline, on_peer);
}

}  // namespace collectives
}  // namespace lockstep

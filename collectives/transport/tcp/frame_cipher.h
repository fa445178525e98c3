// FrameCipher: AES-256-GCM for one direction of a TCP connection (communication.encrypt).
// Each TcpTransport connection carries bytes one way only, so it has one FrameCipher at each
// end, with one key: HKDF-SHA256 of the group secret, salted with both handshake nonces
// (fresh per connection) and bound to the group and the two ranks. Messages travel as frames
// of at most kFrameBytes plaintext bytes, each followed by its 16-byte tag; the frame's nonce
// (IV) is a counter both ends keep, never sent, so a frame dropped, replayed, reordered or
// changed on the way fails the tag of the frame it lands in.
// Ownership: owns its OpenSSL context. Thread model: one thread at a time (the transport's).
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_FRAME_CIPHER_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_FRAME_CIPHER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "collectives/transport/piece_cursor.h"
#include "collectives/transport/tcp/tcp_handshake.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace lockstep {
namespace collectives {

class FrameCipher {
 public:
  static constexpr size_t kTagBytes = 16;
  // Plaintext bytes per frame at most (a message's last frame holds the rest).
  static constexpr size_t kFrameBytes = 64 << 10;

  // The cipher of the connection `connector` opened to `acceptor` after a handshake with
  // `nonces`, under `me`'s secret and group. INTERNAL when OpenSSL fails.
  static absl::StatusOr<std::unique_ptr<FrameCipher>> Create(const HandshakeIdentity& me,
                                                             const HandshakeNonces& nonces,
                                                             int connector, int acceptor);
  ~FrameCipher();
  FrameCipher(const FrameCipher&) = delete;
  FrameCipher& operator=(const FrameCipher&) = delete;

  // Encrypts the next `len` (<= kFrameBytes) bytes at `plain` (advanced past them) into
  // `out`: len bytes of ciphertext, then the tag. INTERNAL when OpenSSL fails.
  absl::Status Seal(PieceCursor& plain, size_t len, unsigned char* out);
  // Decrypts a frame of `len` plaintext bytes (`in`: len + kTagBytes) into the next `len`
  // bytes at `plain` (advanced past them). False when its tag does not verify: the bytes at
  // `plain` are then garbage and the stream cannot go on.
  bool Open(const unsigned char* in, size_t len, PieceCursor& plain);

 private:
  FrameCipher() = default;
  // The next frame's IV: 4 zero bytes, then the frame counter.
  const unsigned char* NextIv();

  EVP_CIPHER_CTX* ctx_ = nullptr;
  std::array<unsigned char, 32> key_{};
  std::array<unsigned char, 12> iv_{};
  uint64_t frames_ = 0;
  bool keyed_ = false;  // ctx_ holds the key (each end only seals or only opens)
};

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_FRAME_CIPHER_H_

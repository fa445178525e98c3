#include "common/secure_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace lockstep {

void SecureRandomBytes(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "lockstep: getrandom failed (%s); no secret can be made safely\n",
                   std::strerror(errno));
      std::abort();
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

std::string SecureRandomHex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  SecureRandomBytes(raw.data(), raw.size());
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

uint64_t SecureRandomUint64() {
  uint64_t v = 0;
  SecureRandomBytes(&v, sizeof(v));
  return v;
}

}  // namespace lockstep

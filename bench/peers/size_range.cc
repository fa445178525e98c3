#include "bench/peers/size_range.h"

#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockstep::bench {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  uint64_t scale = 1;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(digits.back())) {
      case 'K':
        scale = uint64_t{1} << 10;
        break;
      case 'M':
        scale = uint64_t{1} << 20;
        break;
      case 'G':
        scale = uint64_t{1} << 30;
        break;
      default:
        break;
    }
    if (scale != 1) digits.remove_suffix(1);
  }
  uint64_t value = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &value) ||
      value > std::numeric_limits<uint64_t>::max() / scale) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad byte size '", text, "': expected a number with an optional K, M or G ",
                     "suffix (binary units), e.g. 8, 4K, 64M"));
  }
  return value * scale;
}

absl::StatusOr<std::vector<uint64_t>> ParseSizeRange(absl::string_view text) {
  const size_t colon = text.find(':');
  absl::string_view min_text = text.substr(0, colon);
  absl::string_view max_text = colon == absl::string_view::npos ? min_text : text.substr(colon + 1);
  absl::StatusOr<uint64_t> min_bytes = ParseByteSize(min_text);
  if (!min_bytes.ok()) return min_bytes.status();
  absl::StatusOr<uint64_t> max_bytes = ParseByteSize(max_text);
  if (!max_bytes.ok()) return max_bytes.status();
  const std::string context = absl::StrCat("--sizes '", text, "'");
  if (*min_bytes == 0 || *min_bytes % 4 != 0 || *max_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": sizes must be positive multiples of 4 bytes (float32)"));
  }
  if (*min_bytes > *max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": MIN is larger than MAX"));
  }
  std::vector<uint64_t> sizes;
  for (uint64_t bytes = *min_bytes; bytes <= *max_bytes; bytes *= 2) {
    sizes.push_back(bytes);
    if (bytes > *max_bytes / 2) break;  // The next doubling would pass MAX (or overflow).
  }
  return sizes;
}

}  // namespace lockstep::bench

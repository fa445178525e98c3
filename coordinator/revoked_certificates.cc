#include "coordinator/revoked_certificates.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/certs.h"

namespace lockstep {
namespace coordinator {

absl::StatusOr<RevokedCertificates> RevokedCertificates::Parse(absl::string_view text,
                                                               absl::string_view source) {
  RevokedCertificates out;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields.size() != 1 || !IsValidCertificateName(fields[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", number,
                       ": expected one certificate name (a host or pod "
                       "name, as `lockstep certs issue` takes), got \"",
                       line, "\""));
    }
    out.names_.insert(std::string(fields[0]));
  }
  return out;
}

absl::StatusOr<RevokedCertificates> RevokedCertificates::Load(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    return absl::NotFoundError(absl::StrCat("--revoked_certificates_file: cannot read ", path));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return Parse(ss.str(), path);
}

}  // namespace coordinator
}  // namespace lockstep

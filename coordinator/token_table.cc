#include "coordinator/token_table.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/secret_file.h"
#include "common/status.h"

namespace lockstep {
namespace coordinator {

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    const std::string where = absl::StrCat(source, " line ", line_no);
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": expected `<token> <role> <name>`, got ", fields.size(), " field(s)"));
    }
    std::optional<Role> role = ClientRole(fields[1]);
    if (!role.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": role \"", fields[1], "\": expected viewer or operator"));
    }
    if (fields[0].size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the token of ", fields[2],
                       " is shorter than 16 characters (`lockstep certs token` makes a good one)"));
    }
    if (!table.principals_.emplace(fields[0], Principal{*role, std::string(fields[2])}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the token of ", fields[2], " is listed twice"));
    }
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("--tokens_file: cannot read ", path));
  LS_RETURN_IF_ERROR(CheckSecretFile(path, "--tokens_file"));
  std::stringstream ss;
  ss << f.rdbuf();
  return Parse(ss.str(), path);
}

std::optional<Principal> TokenTable::FindBearer(absl::string_view header) const {
  if (!absl::ConsumePrefix(&header, "Bearer ")) return std::nullopt;
  auto it = principals_.find(absl::StripAsciiWhitespace(header));
  if (it == principals_.end()) return std::nullopt;
  return it->second;
}

}  // namespace coordinator
}  // namespace lockstep

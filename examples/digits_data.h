// The bundled digits data set (examples/data/digits.csv.gz, see its README): loaded,
// scaled to [0, 1] and split 80/20 deterministically into train and test parts.
#ifndef LOCKSTEP_EXAMPLES_DIGITS_DATA_H_
#define LOCKSTEP_EXAMPLES_DIGITS_DATA_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "data/element.h"

namespace lockstep::examples {

// Relative to the workspace root (the working directory of `bazel run` and `bazel test`).
inline constexpr char kDigitsPath[] = "examples/data/digits.csv.gz";
inline constexpr uint64_t kDigitsSplitSeed = 2024;

// {train, test}: features [n, 64] f32 in [0, 1], labels [n] i64.
absl::StatusOr<std::pair<data::Element, data::Element>> LoadDigits(
    const std::string& path = kDigitsPath);

}  // namespace lockstep::examples

#endif  // LOCKSTEP_EXAMPLES_DIGITS_DATA_H_

#include "examples/digits_data.h"

#include "data/dataset.h"
#include "data/split.h"

namespace lockstep::examples {

absl::StatusOr<std::pair<data::Element, data::Element>> LoadDigits(const std::string& path) {
  absl::StatusOr<data::Element> all =
      data::ReadAll(data::Dataset::Csv({path}).Normalize({0.0f}, {16.0f}));
  if (!all.ok()) return all.status();
  return data::TrainTestSplit(*all, 0.2, kDigitsSplitSeed);
}

}  // namespace lockstep::examples

#include "data/split.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/philox.h"

namespace lockstep::data {

absl::StatusOr<Element> ReadAll(const Dataset& dataset) {
  absl::StatusOr<std::unique_ptr<DatasetIterator>> it = dataset.MakeIterator();
  if (!it.ok()) return it.status();
  std::vector<Element> all;
  while (true) {
    Element e;
    absl::StatusOr<bool> more = (*it)->Next(&e);
    if (!more.ok()) return more.status();
    if (!*more) break;
    all.push_back(std::move(e));
  }
  if (all.empty()) return absl::InvalidArgumentError("ReadAll: the dataset is empty");
  return Stack(all);
}

absl::StatusOr<std::pair<Element, Element>> TrainTestSplit(const Element& all, double test_fraction,
                                                           uint64_t seed) {
  if (!(test_fraction >= 0 && test_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TrainTestSplit: test_fraction ", test_fraction, " is not in [0, 1]"));
  }
  const int64_t n = all.features.shape().dim(0);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const engine::Philox rng(engine::MixKey(seed, engine::HashName("train_test_split")));
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with counter-based draws
    engine::Philox::Block b = rng.Generate(static_cast<uint64_t>(i));
    uint64_t r = (static_cast<uint64_t>(b[0]) << 32) | b[1];
    std::swap(order[i], order[r % static_cast<uint64_t>(i + 1)]);
  }
  const int64_t test = static_cast<int64_t>(std::llround(n * test_fraction));
  std::vector<Element> train_rows, test_rows;
  for (int64_t i = 0; i < n; ++i) {
    (i < test ? test_rows : train_rows).push_back(Slice(all, order[i]));
  }
  std::pair<Element, Element> out;
  if (!train_rows.empty()) {
    absl::StatusOr<Element> t = Stack(train_rows);
    if (!t.ok()) return t.status();
    out.first = *std::move(t);
  }
  if (!test_rows.empty()) {
    absl::StatusOr<Element> t = Stack(test_rows);
    if (!t.ok()) return t.status();
    out.second = *std::move(t);
  }
  return out;
}

}  // namespace lockstep::data

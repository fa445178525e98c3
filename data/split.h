// Whole-dataset helpers for small data sets: read everything into one Element, and split
// it deterministically into train and test parts (the bundled digits example).
#ifndef LOCKSTEP_DATA_SPLIT_H_
#define LOCKSTEP_DATA_SPLIT_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace lockstep::data {

// Every element of a finite dataset stacked: features [n, ...], labels [n].
// INVALID_ARGUMENT for an empty dataset; the dataset's own errors otherwise.
absl::StatusOr<Element> ReadAll(const Dataset& dataset);

// A seeded permutation of the examples, the first round(n * test_fraction) of which are the
// test part: the same seed always gives the same split. Returns {train, test}.
absl::StatusOr<std::pair<Element, Element>> TrainTestSplit(const Element& all, double test_fraction,
                                                           uint64_t seed);

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_SPLIT_H_

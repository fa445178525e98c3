// Element: what a dataset yields: one example or a batch of them, as a features tensor
// (f32) and a labels tensor (i64 class ids, or f32 targets). A value type; the tensors
// are reference-counted (copying an Element aliases them).
#ifndef LOCKSTEP_DATA_ELEMENT_H_
#define LOCKSTEP_DATA_ELEMENT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/tensor.h"

namespace lockstep::data {

struct Element {
  engine::Tensor features;
  engine::Tensor labels;
};

// Stacks elements of equal shapes along a new first axis: features [n, ...], labels [n, ...].
// INVALID_ARGUMENT naming the element whose shape or dtype differs from the first's.
absl::StatusOr<Element> Stack(const std::vector<Element>& elements);

// Element i of a batch (features[i], labels[i]).
Element Slice(const Element& batch, int64_t i);

// Rows [begin, end) of a batch, copied.
Element Rows(const Element& batch, int64_t begin, int64_t end);

// Splits a global batch into `parts` per-replica batches of consecutive rows, as even as
// possible: the first (rows % parts) get one row more; with fewer rows than parts the last
// ones are empty (0 rows). parts must be >= 1.
std::vector<Element> SplitBatch(const Element& batch, int parts);

}  // namespace lockstep::data

#endif  // LOCKSTEP_DATA_ELEMENT_H_

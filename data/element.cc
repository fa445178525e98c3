#include "data/element.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep::data {
namespace {

engine::Tensor SliceOne(const engine::Tensor& t, int64_t i) {
  std::vector<int64_t> dims(t.shape().dims().begin() + 1, t.shape().dims().end());
  engine::Tensor out(t.dtype(), engine::Shape(dims));
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + i * out.num_bytes(),
              out.num_bytes());
  return out;
}

absl::StatusOr<engine::Tensor> StackOne(const std::vector<Element>& elements, bool labels) {
  const engine::Tensor& first = labels ? elements[0].labels : elements[0].features;
  std::vector<int64_t> dims = {static_cast<int64_t>(elements.size())};
  dims.insert(dims.end(), first.shape().dims().begin(), first.shape().dims().end());
  engine::Tensor out(first.dtype(), engine::Shape(dims));
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < elements.size(); ++i) {
    const engine::Tensor& t = labels ? elements[i].labels : elements[i].features;
    if (t.dtype() != first.dtype() || t.shape() != first.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batching: element ", i, " has ", labels ? "labels " : "features ", t.DebugString(),
          ", element 0 has ", first.DebugString(), "; every element of a batch needs one shape"));
    }
    std::memcpy(dst + i * first.num_bytes(), t.raw_data(), first.num_bytes());
  }
  return out;
}

}  // namespace

absl::StatusOr<Element> Stack(const std::vector<Element>& elements) {
  if (elements.empty()) return absl::InvalidArgumentError("batching: no elements to stack");
  Element out;
  absl::StatusOr<engine::Tensor> f = StackOne(elements, false);
  if (!f.ok()) return f.status();
  absl::StatusOr<engine::Tensor> l = StackOne(elements, true);
  if (!l.ok()) return l.status();
  out.features = *std::move(f);
  out.labels = *std::move(l);
  return out;
}

Element Slice(const Element& batch, int64_t i) {
  return Element{SliceOne(batch.features, i), SliceOne(batch.labels, i)};
}

namespace {

engine::Tensor RowsOf(const engine::Tensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.shape().dims();
  const size_t row_bytes = dims[0] == 0 ? 0 : t.num_bytes() / dims[0];
  dims[0] = end - begin;
  engine::Tensor out(t.dtype(), engine::Shape(dims));
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + begin * row_bytes,
              out.num_bytes());
  return out;
}

}  // namespace

Element Rows(const Element& batch, int64_t begin, int64_t end) {
  return Element{RowsOf(batch.features, begin, end), RowsOf(batch.labels, begin, end)};
}

std::vector<Element> SplitBatch(const Element& batch, int parts) {
  const int64_t rows = batch.features.shape().dim(0);
  std::vector<Element> out;
  int64_t begin = 0;
  for (int p = 0; p < parts; ++p) {
    const int64_t size = rows / parts + (p < rows % parts ? 1 : 0);
    out.push_back(Rows(batch, begin, begin + size));
    begin += size;
  }
  return out;
}

}  // namespace lockstep::data

// A tensor shape: row-major dimensions, empty for a scalar. In graph (static) shapes a
// dimension may be -1 (unknown: the batch size); a Tensor's shape is always fully known.
// A value type; not thread-safe to mutate concurrently.
#ifndef LOCKSTEP_ENGINE_SHAPE_H_
#define LOCKSTEP_ENGINE_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "lockstep/v1/tensor.pb.h"

namespace lockstep::engine {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  // Negative i counts from the end: dim_from_end(-1) is the last dimension.
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank() : i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  void set_dim(int i, int64_t d) { dims_[i] = d; }
  // Product of the dimensions (1 for a scalar). Only meaningful when fully known.
  int64_t num_elements() const;
  bool fully_known() const;
  // "[2,3]"; unknown dimensions print as "?".
  std::string ToString() const;

  v1::TensorShape ToProto() const;
  static Shape FromProto(const v1::TensorShape& proto);

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.ToString(); }

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_SHAPE_H_

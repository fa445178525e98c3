#include "engine/shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep::engine {

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool Shape::fully_known() const {
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

std::string Shape::ToString() const {
  return absl::StrCat("[",
                      absl::StrJoin(dims_, ",",
                                    [](std::string* out, int64_t d) {
                                      absl::StrAppend(out, d < 0 ? "?" : absl::StrCat(d));
                                    }),
                      "]");
}

v1::TensorShape Shape::ToProto() const {
  v1::TensorShape proto;
  for (int64_t d : dims_) proto.add_dims(d);
  return proto;
}

Shape Shape::FromProto(const v1::TensorShape& proto) {
  return Shape(std::vector<int64_t>(proto.dims().begin(), proto.dims().end()));
}

}  // namespace lockstep::engine

// Tests only: a named tensor of any dtype and shape whose bytes are a fixed, non-constant
// pattern (so a misplaced or reordered byte shows).
#ifndef LOCKSTEP_EXPORT_TEST_TENSORS_H_
#define LOCKSTEP_EXPORT_TEST_TENSORS_H_

#include <string>
#include <vector>

#include "lockstep/v1/tensor.pb.h"

namespace lockstep::exporting {

// `bytes` need not match the shape: tests of refusals give it a wrong size on purpose.
inline v1::NamedTensor TestTensor(const std::string& name, v1::DType dtype,
                                  const std::vector<int64_t>& dims, size_t bytes) {
  v1::NamedTensor t;
  t.set_name(name);
  t.mutable_tensor()->set_dtype(dtype);
  for (int64_t d : dims) t.mutable_tensor()->mutable_shape()->add_dims(d);
  std::string content(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) content[i] = static_cast<char>(i * 7 + name.size());
  t.mutable_tensor()->set_content(content);
  return t;
}

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_TEST_TENSORS_H_

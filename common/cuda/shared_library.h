// SharedLibrary: a GPU library opened at run time (dlopen), as TensorFlow's DSO loader does:
// NCCL, cuBLAS and cuDNN are not linked in, so one --config=cuda binary starts on a CPU-only
// host and says what is missing only when a GPU feature is asked for.
//
// Owns the handle; the library is never closed (dlclose of NCCL or cuBLAS while their threads
// run is unsafe, and a process opens each once). Thread model: immutable after Open;
// thread-safe.
#ifndef LOCKSTEP_COMMON_CUDA_SHARED_LIBRARY_H_
#define LOCKSTEP_COMMON_CUDA_SHARED_LIBRARY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// The sonames opened: CUDA 13's cuBLAS, cuDNN 9, NCCL 2.
inline constexpr char kNcclLibrary[] = "libnccl.so.2";
inline constexpr char kCublasLibrary[] = "libcublas.so.13";
inline constexpr char kCublasLtLibrary[] = "libcublasLt.so.13";
inline constexpr char kCudnnLibrary[] = "libcudnn.so.9";

class SharedLibrary {
 public:
  // Opens `soname` through the dynamic loader's search path (LD_LIBRARY_PATH, the ld.so
  // cache). `purpose` says what needs it ("NCCL collectives"). NOT_FOUND when it cannot be
  // loaded: the message names the library, the purpose, the loader's reason and that
  // LD_LIBRARY_PATH must name the directory holding it.
  static absl::StatusOr<std::unique_ptr<SharedLibrary>> Open(absl::string_view soname,
                                                             absl::string_view purpose);

  // The address of `symbol`; NOT_FOUND naming the symbol and the library (an older version
  // than the one Lockstep needs).
  absl::StatusOr<void*> Symbol(absl::string_view symbol) const;

  // Symbol() cast to a function pointer type.
  template <typename F>
  absl::StatusOr<F*> Function(absl::string_view symbol) const {
    absl::StatusOr<void*> p = Symbol(symbol);
    if (!p.ok()) return p.status();
    return reinterpret_cast<F*>(*p);
  }

  const std::string& soname() const { return soname_; }

 private:
  SharedLibrary(std::string soname, void* handle) : soname_(std::move(soname)), handle_(handle) {}

  const std::string soname_;
  void* const handle_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CUDA_SHARED_LIBRARY_H_

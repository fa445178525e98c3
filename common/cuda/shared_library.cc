#include "common/cuda/shared_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace lockstep {

absl::StatusOr<std::unique_ptr<SharedLibrary>> SharedLibrary::Open(absl::string_view soname,
                                                                   absl::string_view purpose) {
  const std::string name(soname);
  // RTLD_LOCAL: the library's symbols stay out of the global namespace, as with a link.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    return absl::NotFoundError(
        absl::StrCat(name, " not found (needed for ", purpose,
                     "): ", reason != nullptr ? reason : "unknown dlopen error",
                     "; set LD_LIBRARY_PATH to the directory holding it (for example a PyTorch "
                     "wheel's nvidia/*/lib, or the CUDA toolkit's lib64) or install it"));
  }
  return std::unique_ptr<SharedLibrary>(new SharedLibrary(name, handle));
}

absl::StatusOr<void*> SharedLibrary::Symbol(absl::string_view symbol) const {
  const std::string s(symbol);
  dlerror();  // clears an earlier error
  void* p = dlsym(handle_, s.c_str());
  if (p == nullptr) {
    const char* reason = dlerror();
    return absl::NotFoundError(absl::StrCat(
        soname_, " has no symbol ", s, " (", reason != nullptr ? reason : "null symbol",
        "): the library is older than Lockstep needs; put a newer one on LD_LIBRARY_PATH"));
  }
  return p;
}

}  // namespace lockstep

// Prints the kernel set OpenBLAS chose in this process ("Haswell", "Zen", ...; it follows
// OPENBLAS_CORETYPE where that is set), so that a script can check the kernels its tests run
// under (tests/other_blas_kernels_test.sh).
#include <cstdio>

#include "engine/kernels/cpu/blas.h"

int main() {
  std::printf("%s\n", lockstep::engine::cpu::BlasCoreName().c_str());
  return 0;
}

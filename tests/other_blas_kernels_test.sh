#!/usr/bin/env bash
# The equivalence tests (two workers against one, strategies against OneDevice) under OpenBLAS
# kernel sets other than this machine's own: each kernel set sums in its own order, and these
# tests must hold under every one a user may have (tests/jobs_test.cc, kResidualCnnSteps, says
# how they were made to). SandyBridge (AVX) and Nehalem (SSE) run on every x86-64-v3 CPU this
# build targets and are no such CPU's own choice, so the suite always sees two more.
#   other_blas_kernels_test.sh BLAS_CORE_NAME EQUIVALENCE_TEST JOBS_TEST
set -uo pipefail
core_name=$1 equivalence=$2 jobs=$3
# The inner test binaries would write their results over this test's own XML report.
unset XML_OUTPUT_FILE GTEST_OUTPUT
failed=0
for core in SandyBridge Nehalem; do
  got=$(OPENBLAS_CORETYPE=$core "$core_name")
  if [ "${got,,}" != "${core,,}" ]; then
    echo "FAIL: OPENBLAS_CORETYPE=$core ran OpenBLAS's '$got' kernels: the test would not see $core"
    failed=1
    continue
  fi
  echo "== OpenBLAS $got kernels"
  OPENBLAS_CORETYPE=$core "$equivalence" || { echo "FAIL: $equivalence under $core"; failed=1; }
  OPENBLAS_CORETYPE=$core "$jobs" --gtest_filter='*SameWeights*:*MatchesOneWorker*' ||
    { echo "FAIL: $jobs under $core"; failed=1; }
done
exit "$failed"

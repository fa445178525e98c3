#!/usr/bin/env bash
# Runs every test: installs what the build needs, then `bazel test //...` (CPU only;
# tests tagged requires-gpu are skipped here, see .bazelrc), then, with no arguments, builds
# the CUDA configuration (--config=cuda) without running it. Extra arguments go to Bazel,
# e.g. `tools/test.sh //collectives/...`.
# Ends with one plain line: "N passed, N failed" (test targets).
set -uo pipefail
cd "$(dirname "$0")/.."

tools/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed"; exit 1; }

targets=("$@")
[ "${#targets[@]}" -eq 0 ] && targets=(//...)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
flags=(--test_summary=short)
# CI: plain output, no curses progress.
if [ "${CI:-}" = "true" ] || [ ! -t 1 ]; then flags+=(--curses=no --color=no --show_progress_rate_limit=30); fi

bazel test "${flags[@]}" "${targets[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# "(cached)", or "(3/4 cached)" for a sharded test whose shards were partly cached. FAILED
# also counts "FAILED TO BUILD".
cached='(\(([0-9]+/[0-9]+ )?cached\) )?'
passed=$(grep -cE "^//[^ ]+ +${cached}PASSED" "$log")
failed=$(grep -cE "^//[^ ]+ +${cached}(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)" "$log")
# A build error can stop Bazel before it lists any test: count that as a failure.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi

# The full run also compiles and links the GPU code (--config=cuda: binaries and requires-gpu
# tests, run nowhere here) so that it cannot rot. It shares the CPU build's objects: about a
# minute and a half more on a 2-core machine. Skipped, saying so, where no CUDA toolkit is
# installed ($CUDA_PATH or /usr/local/cuda).
if [ "$#" -eq 0 ]; then
  if [ -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ]; then
    start=$SECONDS
    build_flags=("${flags[@]:1}")  # the output flags, without --test_summary
    bazel build --config=cuda "${build_flags[@]}" //... >"$log" 2>&1
    cuda_rc=$?
    tail -n 3 "$log"
    if [ "$cuda_rc" -eq 0 ]; then
      echo "CUDA build (--config=cuda //...): built in $((SECONDS - start)) s"
    else
      grep -E "^ERROR" "$log" | head -n 20
      echo "CUDA build (--config=cuda //...): FAILED"
      failed=$((failed + 1))
      rc=1
    fi
  else
    echo "CUDA build skipped: no CUDA toolkit at ${CUDA_PATH:-/usr/local/cuda}"
  fi
fi
echo
echo "$passed passed, $failed failed"
exit "$rc"

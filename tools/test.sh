#!/usr/bin/env bash
# Runs every test: installs what the build needs, then `bazel test //...` (CPU only;
# tests tagged requires-gpu are skipped here, see .bazelrc), then, with no arguments, builds
# the CUDA configuration (--config=cuda) and checks that its binaries, asked for a GPU on this
# driverless machine, refuse saying what is missing (tools/gpu_driverless_check.sh, counted as
# one test). Extra arguments go to Bazel,
# e.g. `tools/test.sh //collectives/...`.
# Ends with one plain line: "N passed, N failed, N skipped": passed and failed count test
# targets, skipped counts test cases that skipped (from the targets' test.xml files); a
# target whose cases all skipped is listed by name above it.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

targets=("$@")
[ "${#targets[@]}" -eq 0 ] && targets=(//...)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# CI=true reaches the tests (common/ci_skip.h): there a missing capability that CI machines
# have (root, network namespaces, IPv6 loopback, Prometheus, Open MPI) fails instead of
# skipping.
flags=(--test_summary=short --test_env=CI)
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

# Skipped test cases, from the gtest XML of each target this run listed (every shard's):
# <testcase ... result="skipped">. A passing target whose run cases all skipped is named.
skipped=0
all_skipped=()
while read -r target; do
  dir="bazel-testlogs/$(echo "${target#//}" | tr ':' '/')"
  [ -d "$dir" ] || continue
  run=0
  skip=0
  while IFS= read -r -d '' xml; do
    run=$((run + $(grep -c '<testcase [^>]*status="run"' "$xml")))
    skip=$((skip + $(grep -c '<testcase [^>]*result="skipped"' "$xml")))
  done < <(find "$dir" -name test.xml -print0)
  skipped=$((skipped + skip))
  if [ "$run" -gt 0 ] && [ "$skip" -eq "$run" ] && grep -qE "^$target +${cached}PASSED" "$log"; then
    all_skipped+=("$target")
  fi
done < <(grep -E "^//[^ ]+ +${cached}(PASSED|FAILED|TIMEOUT|FLAKY)" "$log" | awk '{print $1}')

# The full run also compiles and links the GPU code (--config=cuda: binaries and requires-gpu
# tests, the tests run nowhere here) so that it cannot rot. It shares the CPU build's objects: about a
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
      # Its binaries on this driverless machine: each asked for a GPU refuses, naming what is
      # missing, in seconds (tools/gpu_driverless_check.sh); counted as one test.
      tools/gpu_driverless_check.sh "$(bazel info --config=cuda bazel-bin 2>/dev/null)"
      case $? in
        0) passed=$((passed + 1)) ;;
        3) echo "driverless start-up not checked: this machine has the NVIDIA driver" ;;
        *)
          echo "driverless start-up (tools/gpu_driverless_check.sh): FAILED"
          failed=$((failed + 1))
          rc=1
          ;;
      esac
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
for target in "${all_skipped[@]}"; do echo "every test case skipped: $target"; done
echo "$passed passed, $failed failed, $skipped skipped"
exit "$rc"

#!/usr/bin/env bash
# Runs tests under ThreadSanitizer: builds the instrumented Abseil if needed
# (tools/build_tsan_deps.sh, cached), then `bazel test --config=tsan`. Arguments go to
# Bazel; by default the trees with the most threads:
#   tools/tsan.sh                       # collectives, coordinator, worker, distribute
#   tools/tsan.sh //worker:lockstepd_test --test_output=streamed
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
tools/build_tsan_deps.sh
args=("$@")
[ "${#args[@]}" -eq 0 ] && args=(//collectives/... //coordinator/... //worker/... //distribute/...)
exec bazel test --config=tsan "${args[@]}"

#!/usr/bin/env bash
# Runs every test: installs what the build needs, then `bazel test //...` (CPU only;
# tests tagged requires-gpu are skipped here, see .bazelrc). Extra arguments go to Bazel,
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
echo
echo "$passed passed, $failed failed"
exit "$rc"

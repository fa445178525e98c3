#!/usr/bin/env bash
# Builds one fuzz target (fuzz/BUILD.bazel) with clang, libFuzzer, ASan and UBSan
# (--config=fuzz) and runs it, niced, on a copy of its seed corpus.
#
#   tools/fuzz.sh TARGET [RUNS] [SECONDS] [-- LIBFUZZER_FLAGS...]
#   tools/fuzz.sh csv_reader_fuzzer 10000000 600
#   tools/fuzz.sh --list
#
# Stops after RUNS executions (default 10000000) or SECONDS seconds (default 600), whichever
# comes first. New inputs go to $FUZZ_WORK/<target>/corpus (default /tmp/lockstep-fuzz), the
# seeds are only read; crashes, leaks and timeouts are written to $FUZZ_WORK/<target>/ as
# crash-*, leak-*, timeout-*: fix the parser, then commit the input as
# fuzz/corpus/<target>/regress-<what> so every `bazel test` replays it.
# Needs clang and libclang-rt-14-dev (not part of tools/bootstrap.sh: CI only replays).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--list" ]; then
  sed -n 's/^    name = "\(.*_fuzzer\)",$/\1/p' fuzz/BUILD.bazel
  exit 0
fi
target="${1:?usage: tools/fuzz.sh TARGET [RUNS] [SECONDS] [-- LIBFUZZER_FLAGS...] (or --list)}"
runs="${2:-10000000}"
seconds="${3:-600}"
shift $(($# < 3 ? $# : 3))
if [ "${1:-}" = "--" ]; then shift; fi

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz: $tool missing: apt-get install clang libclang-rt-14-dev" >&2; exit 1; }
done
if [ ! -d "fuzz/corpus/$target" ]; then
  echo "fuzz: no seed corpus fuzz/corpus/$target; targets: $("$0" --list | tr '\n' ' ')" >&2
  exit 1
fi

# An output base of its own: the clang tree and the usual gcc tree never evict each other.
output_base="${FUZZ_OUTPUT_BASE:-$HOME/.cache/lockstep-fuzz-output-base}"
nice -n 10 bazel --output_base="$output_base" build --config=fuzz "//fuzz:$target"
binary="$(bazel --output_base="$output_base" info --config=fuzz bazel-bin)/fuzz/$target"

work="${FUZZ_WORK:-/tmp/lockstep-fuzz}/$target"
mkdir -p "$work/corpus"
cd "$work"
# -rss_limit_mb: an input of a few bytes that asks for gigabytes is a finding (OOM), not noise.
exec nice -n 10 "$binary" -runs="$runs" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 "$@" \
  "$work/corpus" "$OLDPWD/fuzz/corpus/$target"

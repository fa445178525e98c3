#!/usr/bin/env bash
# The layering of DESIGN.md ("Layout and dependency direction"), checked on the sources: no
# C++ file includes a header of a layer above its own, worker/ and coordinator/ never include
# each other, and collectives/ never includes engine/. Bazel visibility (//:BUILD.bazel's package groups) enforces the same
# on targets; this catches what visibility does not see (a package opened to everyone, a
# header reached through another target's deps). A hit fails naming file, line and layers.
#   tools/layering_test.sh tools/layering_test.sh     (the argument locates the tree)
# A new top-level folder with C++ in it must be given its layer below.
set -uo pipefail
root=$(cd "$(dirname "$(readlink -f "$1")")/.." && pwd)
[ -f "$root/WORKSPACE" ] || {
  echo "FAIL: $root (from $1) is not the source tree" >&2
  exit 1
}

# Lower numbers are lower layers; the harness (tests, benchmarks, tools...) may use any.
declare -A layer=(
  [proto]=0 [common]=0 [third_party]=0
  [collectives]=1 [engine]=1 [data]=1 [export]=1
  [distribute]=2 [checkpoint]=2
  [worker]=3 [coordinator]=3 [jobspec]=3
  [client]=4
  [bench]=5 [deploy]=5 [examples]=5 [fuzz]=5 [tests]=5 [tools]=5 [python]=5
)
# Folders of one layer that must not include each other: "from to".
forbidden=("worker coordinator" "coordinator worker" "collectives engine")
# Known exceptions, each a file and the header it may include against the rule, with why.
# None today; an entry reads ["coordinator/x.cc worker/y.h"]=1, with its reason above it.
declare -A allowed=()

if git -C "$root" ls-files --error-unmatch WORKSPACE >/dev/null 2>&1; then
  hits=$(git -C "$root" grep -nE --untracked '^#include "[a-z_]+/' -- '*.cc' '*.h' '*.cu' '*.cu.h')
else
  hits=$(cd "$root" && grep -rnE --include='*.cc' --include='*.h' --include='*.cu' \
    '^#include "[a-z_]+/' $(ls -d */ | grep -v '^bazel-'))
fi

failures=0
checked=0
while IFS= read -r hit; do
  [ -n "$hit" ] || continue
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  from=${file%%/*}
  [[ $rest =~ ^[0-9]+:#include\ \"(([a-z_]+)/[^\"]*)\" ]] || continue
  to=${BASH_REMATCH[2]}
  [ -n "${allowed["$file ${BASH_REMATCH[1]}"]+x}" ] && continue
  [ "$from" = "$to" ] && continue
  [ -n "${layer[$to]+x}" ] || continue  # not one of ours (absl/, grpcpp/, gtest/...)
  if [ -z "${layer[$from]+x}" ]; then
    echo "FAIL: $file: top-level folder $from/ has no layer in tools/layering_test.sh"
    failures=$((failures + 1))
    continue
  fi
  checked=$((checked + 1))
  sideways=false
  for pair in "${forbidden[@]}"; do [ "$pair" = "$from $to" ] && sideways=true; done
  if [ "${layer[$to]}" -gt "${layer[$from]}" ] || $sideways; then
    echo "FAIL: $file:$line includes $to/ (layer ${layer[$to]}) from $from/ (layer ${layer[$from]})"
    failures=$((failures + 1))
  fi
done <<<"$hits"

if [ "$checked" -lt 100 ]; then
  echo "FAIL: only $checked cross-folder includes found under $root: is it the tree?"
  exit 1
fi
if [ "$failures" -gt 0 ]; then
  echo "$failures include(s) against the layering"
  exit 1
fi
echo "PASS: $checked cross-folder includes follow the layering"

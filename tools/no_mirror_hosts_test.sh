#!/usr/bin/env bash
# No package mirror or registry host configured on this machine is named in the tree: the
# hosts come from its apt sources (tools/apt_mirror.sh --hosts), npm's configured registry
# and the LOCKSTEP_APT_*MIRROR overrides when set; a hit fails naming file and line. npm lock
# files record no `resolved` URLs either, so `npm ci` fetches from npm's configured registry.
#   tools/no_mirror_hosts_test.sh tools/apt_mirror.sh
# The tree is the checkout this runfile links to (Bazel's runfiles point into the source
# tree), read with `git grep` over its tracked and untracked files, or grep -r where git
# cannot read it.
# Not cached (tag "external"): it reads the machine's configuration and the whole tree.
set -uo pipefail
helper=$(readlink -f "$1")
root=$(cd "$(dirname "$helper")/.." && pwd)
[ -f "$root/WORKSPACE" ] || {
  echo "FAIL: $root (from $1) is not the source tree" >&2
  exit 1
}

hosts=$("$helper" --hosts)
user_home=$(getent passwd "$(id -u)" | cut -d: -f6)
if command -v npm >/dev/null; then
  registry=$(HOME=${user_home:-$HOME} timeout 60 npm config get registry 2>/dev/null || true)
  hosts="$hosts
$(echo "$registry" | sed -nE 's#^[a-z+]+://([^@/]*@)?([^/:]+).*#\2#p')"
fi
for url in "${LOCKSTEP_APT_MIRROR:-}" "${LOCKSTEP_APT_SECURITY_MIRROR:-}"; do
  hosts="$hosts
$(echo "$url" | sed -nE 's#^[a-z+]+://([^@/]*@)?([^/:]+).*#\2#p')"
done
hosts=$(echo "$hosts" | grep -F . | sort -u)

# search GREP-ARGS...: file:line:text of every hit in the tree's files (search_locks: in its
# npm lock files). With git: tracked and untracked files, not ignored ones.
if git -C "$root" ls-files --error-unmatch WORKSPACE >/dev/null 2>&1; then
  files=$(git -C "$root" ls-files --cached --others --exclude-standard | wc -l)
  search() { git -C "$root" grep -nI --untracked "$@"; }
  search_locks() { git -C "$root" grep -nI --untracked "$@" -- '*package-lock.json'; }
else
  files=$(find "$root" \( -name .git -o -name 'bazel-*' -o -name node_modules \) -prune \
    -o -type f -print | wc -l)
  search() {
    (cd "$root" && grep -rnI --exclude-dir=.git --exclude-dir='bazel-*' \
      --exclude-dir=node_modules "$@" .)
  }
  search_locks() { search --include=package-lock.json "$@"; }
fi
[ "$files" -gt 100 ] || {
  echo "FAIL: only $files files found under $root: the tree was not read" >&2
  exit 1
}

failed=0
for h in $hosts; do
  if hits=$(search -F -e "$h"); then
    echo "FAIL: the host of a package mirror or registry configured on this machine is written" \
      "into the tree; read it from the machine (tools/apt_mirror.sh, npm config get registry):" >&2
    echo "$hits" >&2
    failed=1
  fi
done
if hits=$(search_locks -E -e '"resolved": *"'); then
  echo "FAIL: a lock file records where packages were downloaded (a registry's host): drop its" \
    "\"resolved\" fields, so that npm ci fetches from npm's configured registry:" >&2
  echo "$hits" >&2
  failed=1
fi
[ "$failed" -eq 0 ] || exit 1
echo "no_mirror_hosts: none of $(echo "$hosts" | grep -c .) configured hosts in $files files of $root"

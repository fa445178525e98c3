#!/usr/bin/env bash
# tools/apt_mirror.sh against apt sources written here (deb822 and one-line, with the entries
# it must pass over), its overrides, and the message it gives when it finds nothing.
#   tools/apt_mirror_test.sh tools/apt_mirror.sh
set -uo pipefail
helper=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect WANT ARGS...: the helper prints WANT and exits 0.
expect() {
  local want=$1 got
  shift
  got=$("$helper" "$@" 2>&1) || fail "apt_mirror.sh $* exited $? ($got)"
  [ "$got" = "$want" ] || fail "apt_mirror.sh $*: got '$got', want '$want'"
}

# refuses MESSAGE ARGS...: the helper exits 1 and its message contains MESSAGE.
refuses() {
  local message=$1 got rc
  shift
  got=$("$helper" "$@" 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] || fail "apt_mirror.sh $*: exit $rc, want 1 ($got)"
  case "$got" in
    *"$message"*) ;;
    *) fail "apt_mirror.sh $*: '$got' does not say '$message'" ;;
  esac
}

unset LOCKSTEP_APT_MIRROR LOCKSTEP_APT_SECURITY_MIRROR

# deb822: a disabled stanza, a deb-src-only one, another distribution's and comments come
# before the archive; the first of its URIs is taken.
export LOCKSTEP_APT_ETC="$tmp/deb822"
mkdir -p "$LOCKSTEP_APT_ETC/sources.list.d"
cat >"$LOCKSTEP_APT_ETC/sources.list.d/a-other.sources" <<'SOURCES'
Types: deb
URIs: https://other.example.test/node
Suites: nodistro
Components: main
SOURCES
cat >"$LOCKSTEP_APT_ETC/sources.list.d/debian.sources" <<'SOURCES'
# A comment: http://commented.example.test/debian
Types: deb
URIs: http://disabled.example.test/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src
URIs: http://source-only.example.test/debian
Suites: bookworm
Components: main

types: deb deb-src
uris: http://mirror.example.test/debian/   http://second.example.test/debian
suites: bookworm bookworm-updates
components: main

Types: deb
URIs: http://security.example.test/debian-security
Suites: bookworm-security
Components: main
SOURCES
expect http://mirror.example.test/debian bookworm
expect http://mirror.example.test/debian bookworm-updates
expect http://security.example.test/debian-security --security bookworm
expect "commented.example.test
disabled.example.test
mirror.example.test
other.example.test
second.example.test
security.example.test
source-only.example.test" --hosts
refuses "set LOCKSTEP_APT_MIRROR" trixie

# One-line format: comments, deb-src and [options] are passed over; the old security suite
# name (SUITE/updates) counts.
export LOCKSTEP_APT_ETC="$tmp/one-line"
mkdir -p "$LOCKSTEP_APT_ETC/sources.list.d"
cat >"$LOCKSTEP_APT_ETC/sources.list" <<'SOURCES'
# deb http://commented.example.test/debian bookworm main
deb-src http://source-only.example.test/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://line.example.test/debian/ bookworm main
SOURCES
cat >"$LOCKSTEP_APT_ETC/sources.list.d/security.list" <<'SOURCES'
deb http://line-security.example.test/debian-security bullseye/updates main
SOURCES
expect http://line.example.test/debian bookworm
expect http://line-security.example.test/debian-security --security bullseye
refuses "set LOCKSTEP_APT_SECURITY_MIRROR" --security bookworm

# The overrides win over the machine's sources, trailing slash dropped.
LOCKSTEP_APT_MIRROR=http://override.example.test/debian/ expect \
  http://override.example.test/debian bookworm
LOCKSTEP_APT_SECURITY_MIRROR=http://override-security.example.test/ds expect \
  http://override-security.example.test/ds --security bookworm
LOCKSTEP_APT_MIRROR=http://override.example.test/debian expect \
  http://override.example.test/debian trixie

# Nothing configured: the message names the override to set.
export LOCKSTEP_APT_ETC="$tmp/empty"
mkdir -p "$LOCKSTEP_APT_ETC"
refuses "no enabled apt source in $tmp/empty/sources.list{,.d} serves bookworm; set LOCKSTEP_APT_MIRROR" bookworm
refuses "set LOCKSTEP_APT_SECURITY_MIRROR" --security bookworm
expect "" --hosts
"$helper" >/dev/null 2>&1
[ $? -eq 2 ] || fail "apt_mirror.sh without arguments should exit 2 (usage)"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "apt_mirror.sh: every check passed"

#!/usr/bin/env bash
# Which Debian mirror this machine's apt uses, read from its own apt sources, so that scripts
# that fetch Debian packages (deploy/docker/build.sh, tools/build_tsan_deps.sh) go where the
# machine's administrator pointed apt (a local mirror, a proxy, a snapshot) and no mirror's
# host name is ever written into this project.
#
#   tools/apt_mirror.sh SUITE             # the archive serving SUITE (e.g. bookworm)
#   tools/apt_mirror.sh --security SUITE  # the archive serving SUITE-security
#   tools/apt_mirror.sh --hosts           # every host named in the apt sources, one a line
#
# Prints the first URI (without a trailing slash) of the first enabled `deb` entry whose
# suites include the one asked for, reading $LOCKSTEP_APT_ETC (default /etc/apt):
# sources.list and sources.list.d/*.list (one-line format: `deb [options] URI SUITE
# COMPONENT...`), then sources.list.d/*.sources (deb822 stanzas: Types, URIs, Suites,
# Enabled). Overrides, used as they are when set: LOCKSTEP_APT_MIRROR for the archive,
# LOCKSTEP_APT_SECURITY_MIRROR for the security archive. When neither an override nor an
# entry is found it says which override to set and exits 1.
# --hosts reads every file under sources.list.d (disabled ones and comments too): what the
# tree must never name (tools/no_mirror_hosts_test.sh).
set -euo pipefail

etc=${LOCKSTEP_APT_ETC:-/etc/apt}

usage() {
  echo "usage: apt_mirror.sh [--security] SUITE | --hosts" >&2
  exit 2
}

# Every enabled `deb` entry as "URI SUITE..." lines, one-line files first, then deb822.
entries() {
  local f
  for f in "$etc/sources.list" "$etc"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # Drop comments and the [options] block; keep `deb` (not deb-src) lines: URI and suite.
    sed -E 's/#.*//; s/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
  done
  for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # Stanzas are separated by blank lines; field names are case-insensitive.
    awk '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no" && uris != "" && suites != "") {
          n = split(uris, u, " ")
          for (i = 1; i <= n; i++) print u[i], suites
        }
        types = ""; uris = ""; suites = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        line = $0
        key = tolower(line); sub(/:.*/, "", key)
        value = line; sub(/^[^:]*:[ \t]*/, "", value); gsub(/[ \t]+/, " ", value)
        if (key == "types") types = value
        else if (key == "uris") uris = value
        else if (key == "suites") suites = value
        else if (key == "enabled") enabled = value
      }
      END { flush() }' "$f"
  done
}

# The first URI serving any of the suites given.
mirror_for() {
  local uri suites s want
  while read -r uri suites; do
    for s in $suites; do
      for want in "$@"; do
        if [ "$s" = "$want" ]; then
          echo "${uri%/}"
          return 0
        fi
      done
    done
  done < <(entries)
  return 1
}

case "${1:-}" in
  --hosts)
    [ "$#" -eq 1 ] || usage
    # Hosts of every URL in any apt source file, commented or disabled ones included.
    cat "$etc/sources.list" "$etc"/sources.list.d/* 2>/dev/null |
      grep -oE '[a-z][a-z0-9+.-]*://[^/ :"]+' | sed -E 's#^[^:]*://##; s#^.*@##' |
      grep -F . | sort -u || true
    ;;
  --security)
    [ "$#" -eq 2 ] || usage
    suite=$2
    if [ -n "${LOCKSTEP_APT_SECURITY_MIRROR:-}" ]; then
      echo "${LOCKSTEP_APT_SECURITY_MIRROR%/}"
    elif ! mirror_for "$suite-security" "$suite/updates"; then
      echo "apt_mirror: no enabled apt source in $etc/sources.list{,.d} serves $suite-security;" \
        "set LOCKSTEP_APT_SECURITY_MIRROR to the URL of a Debian security archive" >&2
      exit 1
    fi
    ;;
  -*| "")
    usage
    ;;
  *)
    [ "$#" -eq 1 ] || usage
    suite=$1
    if [ -n "${LOCKSTEP_APT_MIRROR:-}" ]; then
      echo "${LOCKSTEP_APT_MIRROR%/}"
    elif ! mirror_for "$suite"; then
      echo "apt_mirror: no enabled apt source in $etc/sources.list{,.d} serves $suite;" \
        "set LOCKSTEP_APT_MIRROR to the URL of a Debian archive that has it" >&2
      exit 1
    fi
    ;;
esac

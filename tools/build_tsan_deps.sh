#!/usr/bin/env bash
# Builds what `bazel test --config=tsan` needs: Abseil from Debian's own source package for
# the installed libabsl-dev version, compiled with -fsanitize=thread as shared libraries
# (same sonames as Debian's), so that ThreadSanitizer sees absl::Mutex, CondVar and
# call_once in our code and in Debian's gRPC, which loads these libraries in their place.
#
# Cached under ${XDG_CACHE_HOME:-~/.cache}/lockstep-tsan/abseil-<version>: a second run only
# checks the stamp and refreshes the link third_party/tsan_abseil -> that install (< 1 s).
# Installs what it needs to build (dpkg-dev, cmake, ninja-build) when they are missing.
# The deb-src entries name the Debian mirror /etc/apt already uses (tools/apt_mirror.sh), in a
# private apt state directory: the system's apt configuration is not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
workspace=$(pwd)

version=$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null) || {
  echo "build_tsan_deps: libabsl-dev is not installed; run tools/bootstrap.sh first" >&2
  exit 1
}
upstream=${version%%-*}
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lockstep-tsan"
root="$cache/abseil-$version"
prefix="$root/install"
# The flags are part of the stamp: changing them rebuilds.
cxxflags="-fsanitize=thread -O1 -g -fno-omit-frame-pointer"
stamp="$prefix/.lockstep-stamp"
want_stamp="abseil $version; $cxxflags"

# What `bazel test --config=tsan` reads from this checkout: the instrumented Abseil
# (//third_party:absl globs third_party/tsan_abseil/lib) and, in .tsan.bazelrc (imported by
# .bazelrc), the absolute path of the suppressions file every tsan test runs with.
# Both are only rewritten when they change (a running Bazel may be reading them).
link_into_workspace() {
  local link="$workspace/third_party/tsan_abseil" rc="$workspace/.tsan.bazelrc" want
  [ "$(readlink "$link" 2>/dev/null)" = "$prefix" ] || ln -sfn "$prefix" "$link"
  want="# Written by tools/build_tsan_deps.sh for this checkout; not in git.
test:tsan --test_env=TSAN_OPTIONS=suppressions=$workspace/tools/tsan.supp:history_size=4:second_deadlock_stack=1"
  [ "$(cat "$rc" 2>/dev/null)" = "$want" ] || printf '%s\n' "$want" >"$rc"
}

# Checkouts on one machine share the cache: one build at a time, the others then find it.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  link_into_workspace
  exit 0
fi

# Tools only this developer build needs (CI does not install them): the source unpacker,
# CMake and Ninja, and GCC's ThreadSanitizer runtime.
missing=()
for p in dpkg-dev cmake ninja-build libtsan2; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "build_tsan_deps: installing ${missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi

start=$(date +%s)
rm -rf "$root"
mkdir -p "$root/apt/lists/partial" "$root/apt/sources.list.d" "$root/apt/cache" "$root/src"

# deb-src entries for the Debian archive (and its security suite, when apt has one) this
# machine's apt uses: tools/apt_mirror.sh, or LOCKSTEP_APT_MIRROR / LOCKSTEP_APT_SECURITY_MIRROR.
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || {
  echo "build_tsan_deps: /etc/os-release names no VERSION_CODENAME (is this Debian?)" >&2
  exit 1
}
mirror=$(tools/apt_mirror.sh "$codename") || exit 1
srcs="$root/apt/sources.list.d/debian-src.sources"
printf 'Types: deb-src\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' \
  "$mirror" "$codename" "$codename" >"$srcs"
if security=$(tools/apt_mirror.sh --security "$codename" 2>/dev/null); then
  printf '\nTypes: deb-src\nURIs: %s\nSuites: %s-security\nComponents: main\n' \
    "$security" "$codename" >>"$srcs"
fi
apt_opts=(
  -o "Dir::Etc::SourceList=/dev/null"
  -o "Dir::Etc::SourceParts=$root/apt/sources.list.d"
  -o "Dir::State::Lists=$root/apt/lists"
  -o "Dir::Cache=$root/apt/cache"
  -o "APT::Sandbox::User=root"
)
echo "build_tsan_deps: fetching Debian source package abseil=$version" >&2
apt-get "${apt_opts[@]}" -qq update </dev/null
(cd "$root/src" && apt-get "${apt_opts[@]}" -qq source "abseil=$version" </dev/null >/dev/null)
src="$root/src/abseil-$upstream"
[ -d "$src" ] || {
  echo "build_tsan_deps: apt-get source did not unpack $src" >&2
  exit 1
}

# Debian's own configuration (debian/rules: C++17, shared libraries) plus ThreadSanitizer.
echo "build_tsan_deps: building Abseil with -fsanitize=thread (about 2 min on 2 cores)" >&2
cmake -S "$src" -B "$root/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_STANDARD=17 \
  -DBUILD_SHARED_LIBS=ON \
  -DABSL_PROPAGATE_CXX_STD=ON \
  -DBUILD_TESTING=OFF \
  -DCMAKE_CXX_FLAGS="$cxxflags" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
if ! nice cmake --build "$root/build" -j "${TSAN_DEPS_JOBS:-2}" >"$root/build.log" 2>&1; then
  tail -40 "$root/build.log" >&2
  echo "build_tsan_deps: Abseil build failed; full log in $root/build.log" >&2
  exit 1
fi
cmake --install "$root/build" >/dev/null
echo "$want_stamp" >"$stamp"
rm -rf "$root/build" "$root/build.log" "$root/apt"
link_into_workspace
echo "build_tsan_deps: Abseil $version with ThreadSanitizer in $prefix ($(($(date +%s) - start)) s)" >&2

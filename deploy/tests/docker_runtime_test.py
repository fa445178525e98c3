#!/usr/bin/python3
"""The image's runtime stage holds exactly the shared libraries the binaries load: every
library `ldd` lists for them comes from a package that the `runtime` stage of
deploy/docker/Dockerfile installs by name, and every package it installs provides one. The
build machine is Debian 12, as the image is, so the package names are the image's. Also: the
runtime stages run as a non-root user.

    docker_runtime_test.py DOCKERFILE BINARY...
"""
import os
import re
import shutil
import sys

from common import fail, run, skip


def stages(dockerfile):
    """{stage name: [instruction lines, continuation lines joined]}."""
    out, name, text = {}, None, open(dockerfile).read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            name = m.group(1) or f"stage{len(out)}"
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def installed_packages(lines):
    pkgs = set()
    for line in lines:
        for cmd in line.split("&&"):
            words = cmd.split()
            if "apt-get" in words and "install" in words:
                pkgs.update(w for w in words[words.index("install") + 1:] if not w.startswith("-"))
    return pkgs


def candidates(lib):
    """The names dpkg may know a library by (merged /usr: /lib and /usr/lib; symlinks)."""
    out = []
    for path in (lib, os.path.realpath(lib)):
        for c in (path, re.sub(r"^/lib/", "/usr/lib/", path), re.sub(r"^/usr/lib/", "/lib/", path)):
            if c not in out:
                out.append(c)
    return out


def packages_of(libs):
    """{library: package or None}, with one `dpkg -S` for all (it reads every file list)."""
    names = sorted({c for lib in libs for c in candidates(lib)})
    owner = {}
    for line in run(["dpkg", "-S"] + names).stdout.splitlines():
        pkgs, _, path = line.partition(": ")
        owner.setdefault(path.strip(), pkgs.split(",")[0].split(":")[0].strip())
    return {lib: next((owner[c] for c in candidates(lib) if c in owner), None) for lib in libs}


def main():
    if shutil.which("ldd") is None or shutil.which("dpkg") is None:
        skip("ldd or dpkg is missing: this check needs a Debian machine")
    dockerfile, bins = sys.argv[1], sys.argv[2:]
    st = stages(dockerfile)
    if "runtime" not in st:
        fail(f"{dockerfile} has no stage named runtime")
    listed = installed_packages(st["runtime"])

    needed = {}  # package -> a library of it, for the message
    problems = []
    libs = {}  # library -> a binary that loads it
    for b in bins:
        r = run(["ldd", b])
        if r.returncode != 0:
            fail(f"ldd {b}: {r.stderr}")
        for line in r.stdout.splitlines():
            if "not found" in line:
                problems.append(f"{os.path.basename(b)}: {line.strip()}")
                continue
            m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if m:  # not linux-vdso
                libs.setdefault(m.group(1), os.path.basename(b))
    for lib, pkg in sorted(packages_of(list(libs)).items()):
        if pkg is None:
            problems.append(f"{lib} (loaded by {libs[lib]}) is in no package")
        else:
            needed.setdefault(pkg, lib)
    for pkg, lib in sorted(needed.items()):
        if pkg not in listed:
            problems.append(f"runtime stage does not install {pkg} (provides {lib})")
    for pkg in sorted(listed - set(needed)):
        problems.append(f"runtime stage installs {pkg}, which no binary loads")
    for stage in ("runtime", "runtime-cuda"):
        users = [l.split()[1] for l in st.get(stage, []) if l.upper().startswith("USER ")]
        if not users or users[-1].split(":")[0] in ("0", "root"):
            problems.append(f"stage {stage} does not end as a non-root USER")
    if problems:
        fail("\n  ".join(["the Dockerfile's runtime stage and the binaries disagree:"] + problems))
    print(f"ok: {len(needed)} packages, each installed by the runtime stage:",
          " ".join(sorted(needed)))


if __name__ == "__main__":
    main()

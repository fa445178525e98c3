#!/usr/bin/python3
"""Every flag that the Kubernetes manifests, the systemd units and the image scripts pass to
a Lockstep binary exists in that binary (its --helpfull, or `lockstep <command> --help`).

    flags_test.py --bin BINARY... --files FILE...
"""
import collections
import os
import re
import sys

import yaml

from common import binaries, fail, run

DAEMONS = ("lockstepd", "lockstep-coordinator")
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*)")
ENV_ARGS = {"LOCKSTEPD": "lockstepd", "LOCKSTEP_COORDINATOR": "lockstep-coordinator"}


def daemon_flags(path):
    out = run([path, "--helpfull"])
    names = set(re.findall(r"^\s+--([a-z][a-z0-9_]*)", out.stdout + out.stderr, re.M))
    if not names:
        fail(f"{path} --helpfull listed no flags")
    return names


def command_flags(path, command):
    out = run([path, command, "--help"])
    return set(re.findall(r"--([a-z][a-z0-9_]*)", out.stdout + out.stderr))


def containers(obj):
    """Every container in an object (Deployment, StatefulSet, a patch of one)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from containers(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from containers(value)


def from_manifests(files, uses):
    docs = {f: [d for d in yaml.safe_load_all(open(f)) if d is not None] for f in files}
    # Container name -> binary, and object name -> binary, from the containers that say
    # their command (the base); patches that only change args are mapped through them.
    by_container, by_object = {}, {}
    for f, ds in docs.items():
        for d in ds:
            for c in containers(d):
                if c.get("command"):
                    b = os.path.basename(c["command"][0])
                    by_container[c.get("name")] = b
                    if isinstance(d, dict) and "metadata" in d:
                        by_object[d["metadata"]["name"]] = b
    for f, ds in docs.items():
        for d in ds:
            for c in containers(d):
                b = os.path.basename(c["command"][0]) if c.get("command") else by_container.get(
                    c.get("name"))
                for arg in c.get("args", []) + c.get("command", [])[1:]:
                    for flag in FLAG.findall(str(arg)):
                        uses[b].add((flag, f))
            # A JSON patch: a list of operations whose values are arguments.
            if isinstance(d, list):
                target = kustomize_targets(f)
                for op in d:
                    for flag in FLAG.findall(str(op.get("value", "")) if isinstance(op, dict) else ""):
                        for name in target:
                            uses[by_object.get(name)].add((flag, f))


def kustomize_targets(patch_file):
    """The names of the objects a JSON patch file targets, from its kustomization.yaml."""
    k = os.path.join(os.path.dirname(patch_file), "kustomization.yaml")
    if not os.path.exists(k):
        return []
    spec = yaml.safe_load(open(k)) or {}
    base = os.path.basename(patch_file)
    return [p["target"]["name"] for p in spec.get("patchesJson6902", []) + spec.get("patches", [])
            if p.get("path") == base and "target" in p]


def from_text(files, uses, client_uses):
    for f in files:
        for line in open(f):
            # ExecStart=/usr/local/bin/lockstepd --flag ..., `lockstep local --workers=2`.
            for m in re.finditer(r"(?:/usr/local/bin/)?\b(lockstepd|lockstep-coordinator)\b([^\n]*)", line):
                if "ExecStart" in line or "command" in line or m.group(0).startswith("/usr"):
                    for flag in FLAG.findall(m.group(2)):
                        uses[m.group(1)].add((flag, f))
            for m in re.finditer(r"\blockstep (local|status|submit|certs) ([^\n\"]*)", line):
                for flag in FLAG.findall(m.group(2)):
                    client_uses[m.group(1)].add((flag, f))
            # LOCKSTEPD_ARGS=..., LOCKSTEPD_GPU_ARGS=..., LOCKSTEP_COORDINATOR_ARGS=...
            for m in re.finditer(r"\b(LOCKSTEPD|LOCKSTEP_COORDINATOR)(?:_[A-Z]+)?_ARGS=([^\n]*)", line):
                for flag in FLAG.findall(m.group(2)):
                    uses[ENV_ARGS[m.group(1)]].add((flag, f))


def main():
    argv = sys.argv[1:]
    split = argv.index("--files")
    bins = binaries(argv[1:split])
    files = argv[split + 1:]
    uses = collections.defaultdict(set)
    client_uses = collections.defaultdict(set)
    from_manifests([f for f in files if f.endswith(".yaml")], uses)
    from_text([f for f in files if not f.endswith(".yaml")], uses, client_uses)
    if None in uses:
        fail(f"arguments that no binary could be found for: {sorted(uses[None])}")

    missing, checked = [], 0
    for b in DAEMONS:
        known = daemon_flags(bins[b])
        for flag, f in sorted(uses[b]):
            checked += 1
            if flag not in known and not (flag.startswith("no") and flag[2:] in known):
                missing.append(f"{b} --{flag} (in {f})")
    for command, used in sorted(client_uses.items()):
        known = command_flags(bins["lockstep"], command)
        for flag, f in sorted(used):
            checked += 1
            if flag not in known and flag != "help":
                missing.append(f"lockstep {command} --{flag} (in {f})")
    if checked == 0:
        fail("found no flags in the deploy files: the parser is broken")
    if missing:
        fail(f"{len(missing)} of {checked} flag uses name flags the binaries do not have:\n  " +
             "\n  ".join(missing) + "\nmissing flags, in one line: " +
             " ".join(sorted({m.split(" (in")[0] for m in missing})))
    print(f"ok: {checked} flag uses, every one known to its binary")


if __name__ == "__main__":
    main()

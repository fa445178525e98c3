#!/usr/bin/python3
"""The systemd units: `systemd-analyze verify` prints nothing, `systemd-analyze security`
rates each unit's exposure at 4.0 or lower, the template with and without its GPU drop-in,
and each daemon can read its own secrets and not the other's (systemd_secrets.py: the files
install-tls.sh lays out, evaluated for each unit's user and groups).

    systemd_test.py UNIT_DIR BINARY...
"""
import os
import re
import shutil
import sys

import systemd_secrets
from common import binaries, fail, run, skip, tmpdir

MAX_EXPOSURE = 4.0


def stage(unit_dir, bins, dest, with_dropins):
    """Copies the units into dest with ExecStart= pointing at the built binaries (verify
    checks that the command exists)."""
    os.makedirs(dest)
    for name in sorted(os.listdir(unit_dir)):
        src = os.path.join(unit_dir, name)
        if name.endswith(".service"):
            text = open(src).read()
            for b, path in bins.items():
                text = text.replace(f"/usr/local/bin/{b} ", f"{path} ")
            open(os.path.join(dest, name), "w").write(text)
        elif name.endswith(".d") and with_dropins:
            shutil.copytree(src, os.path.join(dest, name))


def main():
    if shutil.which("systemd-analyze") is None:
        skip("systemd-analyze is not installed (tools/bootstrap.sh installs Debian's systemd)")
    unit_dir, bins = os.path.abspath(sys.argv[1]), binaries(sys.argv[2:])
    units = ["lockstep-coordinator.service", "lockstepd@0.service"]
    problems = []
    for variant, dropins in (("plain", False), ("with drop-ins", True)):
        dest = os.path.join(tmpdir(), variant.replace(" ", "-"))
        shutil.rmtree(dest, ignore_errors=True)
        stage(unit_dir, bins, dest, dropins)
        os.chdir(dest)
        v = run(["systemd-analyze", "verify", "--man=no"] + [f"./{u}" for u in units])
        out = (v.stdout + v.stderr).strip()
        if v.returncode != 0 or out:
            problems.append(f"systemd-analyze verify ({variant}) exit {v.returncode}:\n{out}")
        for unit in units:
            s = run(["systemd-analyze", "security", "--offline=true", f"./{unit}"])
            m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", s.stdout)
            if s.returncode != 0 or m is None:
                problems.append(f"systemd-analyze security {unit} ({variant}) failed:\n"
                                f"{s.stdout}{s.stderr}")
                continue
            exposure = float(m.group(1))
            print(f"{unit} ({variant}): exposure {exposure}")
            if exposure > MAX_EXPOSURE:
                worst = [l for l in s.stdout.splitlines() if l.startswith("✗")]
                problems.append(f"{unit} ({variant}): exposure {exposure} > {MAX_EXPOSURE}; "
                                "not hardened:\n  " + "\n  ".join(worst))
        found, why_not = systemd_secrets.check(unit_dir, dest, os.path.join(tmpdir(), "root-" + variant.replace(" ", "-")))
        problems += [f"secrets ({variant}): {p}" for p in found]
        print(f"secrets ({variant}): " + (f"SKIPPED the layout: {why_not}" if why_not else
                                          "each daemon reads its own and not the other's"))
    # The checks can fail: an unknown key is reported, an unhardened unit rates above 4.0.
    os.chdir(tmpdir())
    open("bare.service", "w").write("[Service]\nExecStart=/bin/true\nUMaskk=0077\n")
    v = run(["systemd-analyze", "verify", "--man=no", "./bare.service"])
    if "Unknown key" not in v.stdout + v.stderr:
        problems.append(f"verify did not report an unknown key: {v.stdout}{v.stderr}")
    s = run(["systemd-analyze", "security", "--offline=true", "./bare.service"])
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", s.stdout)
    if m is None or float(m.group(1)) <= MAX_EXPOSURE:
        problems.append(f"an unhardened unit did not rate above {MAX_EXPOSURE}: {s.stdout[-200:]}")
    if problems:
        fail("\n".join(problems))
    print("ok: units verify cleanly, exposure <=", MAX_EXPOSURE)


if __name__ == "__main__":
    main()

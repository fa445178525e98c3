"""Who can read which secret under the systemd units (systemd_test.py runs it):
install-tls.sh lays out a coordinator's and a worker's material in a scratch root, and each
unit's process (a dynamic user that owns nothing, its SupplementaryGroups, minus its
InaccessiblePaths) is evaluated against the installed files' owners and modes, directory by
directory as the kernel does: the coordinator reads its key, certificate and tokens and no
worker's key; a worker reads its own key and neither the coordinator's key nor the tokens;
every key and tokens file passes the daemons' own rule (root-owned, never open to every user,
group read only). Broken variants (a worker in the coordinator's group, a world-readable
tokens file) show that the evaluation can fail.
"""
import os
import re
import shutil
import stat
import subprocess

# Numbers for the groups in the scratch root (install-tls.sh takes them in place of names).
GROUPS = {"lockstep-coordinator": 64101, "lockstep-worker": 64102}
DYNAMIC_UID = 61999  # DynamicUser=: a user that owns no installed file
INSTANCE = "0"


def unit_settings(path, dropins=()):
    """{key: [values]} of a unit's [Service] section and its drop-ins, specifiers %i/%H
    expanded for instance INSTANCE on host `host1`."""
    settings = {}
    for f in (path,) + tuple(dropins):
        section = None
        for line in open(f):
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]" and "=" in line:
                key, value = line.split("=", 1)
                value = value.replace("%i", INSTANCE).replace("%H", "host1")
                settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def flag(settings, name):
    for command in settings.get("ExecStart", []):
        m = re.search(rf"--{name}=(\S+)", command)
        if m:
            return m.group(1)
    return None


def daemon(settings):
    """The process a unit runs: (uid, gids, hidden paths)."""
    groups = set()
    for value in settings.get("SupplementaryGroups", []):
        for g in value.split():
            groups.add(GROUPS.get(g, -1))  # a group install-tls.sh does not use: none of ours
    hidden = [p.lstrip("-") for v in settings.get("InaccessiblePaths", []) for p in v.split()]
    return DYNAMIC_UID, groups, hidden


def can_read(root, path, who):
    """Whether `who` (uid, gids, hidden) could open `path` (absolute, under `root`)."""
    uid, gids, hidden = who
    if any(path == h or path.startswith(h.rstrip("/") + "/") for h in hidden):
        return False
    parts = path.strip("/").split("/")
    for i in range(len(parts) + 1):
        real = os.path.join(root, *parts[:i])
        try:
            st = os.stat(real)
        except FileNotFoundError:
            return False
        need = stat.S_IROTH if i == len(parts) else stat.S_IXOTH
        if st.st_uid == uid:
            bits = need << 6
        elif st.st_gid in gids:
            bits = need << 3
        else:
            bits = need
        if not st.st_mode & bits:
            return False
    return True


def secret_rule(root, path):
    """The daemons' rule (common/secret_file.h): a problem, or None."""
    st = os.stat(os.path.join(root, path.lstrip("/")))
    if st.st_mode & 0o007:
        return f"{path} is open to every user ({st.st_mode & 0o777:04o})"
    if st.st_mode & 0o070 and (st.st_uid != 0 or st.st_mode & 0o020):
        return f"{path} is open to its group ({st.st_mode & 0o777:04o}, owner {st.st_uid})"
    return None


def install(unit_dir, root):
    """Runs install-tls.sh into `root` with stand-in certificates; None or a problem."""
    certs = os.path.join(root, "certs")
    os.makedirs(certs)
    for name in ("ca.crt", "coordinator-host.crt", "coordinator-host.key", "host1-0.crt",
                 "host1-0.key"):
        with open(os.path.join(certs, name), "w") as f:
            f.write(f"stand-in {name}\n")
        os.chmod(os.path.join(certs, name), 0o600)
    tokens = os.path.join(certs, "tokens")
    with open(tokens, "w") as f:
        f.write("0123456789abcdef0123 operator ops\n")
    os.chmod(tokens, 0o600)
    env = dict(os.environ, LOCKSTEP_COORDINATOR_GROUP=str(GROUPS["lockstep-coordinator"]),
               LOCKSTEP_WORKER_GROUP=str(GROUPS["lockstep-worker"]))
    r = subprocess.run(["bash", os.path.join(unit_dir, "install-tls.sh"), f"--root={root}",
                        f"--certs={certs}", "--coordinator=coordinator-host", f"--tokens={tokens}",
                        f"--worker={INSTANCE}:host1-0"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return f"install-tls.sh failed ({r.returncode}):\n{r.stdout}{r.stderr}"
    return None


def evaluate(root, coordinator, worker):
    """Problems with who reads what, for the units' settings (coordinator, worker)."""
    problems = []
    mine = {"lockstep-coordinator": [flag(coordinator, f) for f in
                                     ("tls_ca", "tls_cert", "tls_key", "tokens_file")],
            f"lockstepd@{INSTANCE}": [flag(worker, f) for f in ("tls_ca", "tls_cert", "tls_key")]}
    secrets = {"lockstep-coordinator": [flag(coordinator, "tls_key"), flag(coordinator, "tokens_file")],
               f"lockstepd@{INSTANCE}": [flag(worker, "tls_key")]}
    who = {"lockstep-coordinator": daemon(coordinator), f"lockstepd@{INSTANCE}": daemon(worker)}
    for unit, paths in mine.items():
        for path in paths:
            if path is None:
                problems.append(f"{unit}: its ExecStart lacks a TLS or tokens flag")
            elif not can_read(root, path, who[unit]):
                problems.append(f"{unit} cannot read its own {path}")
    for unit, paths in secrets.items():
        for path in filter(None, paths):
            if os.path.exists(os.path.join(root, path.lstrip("/"))):
                rule = secret_rule(root, path)
                if rule:
                    problems.append(f"{unit} would refuse to start: {rule}")
            for other in who:
                if other != unit and can_read(root, path, who[other]):
                    problems.append(f"{other} can read {unit}'s {path}")
    return problems


def check(unit_dir, staged_dir, scratch):
    """Problems; or a line saying why the layout could not be tried (not root)."""
    coordinator_unit = os.path.join(staged_dir, "lockstep-coordinator.service")
    worker_unit = os.path.join(staged_dir, "lockstepd@.service")
    dropin_dir = os.path.join(staged_dir, "lockstepd@.service.d")
    dropins = sorted(os.path.join(dropin_dir, f) for f in os.listdir(dropin_dir)) \
        if os.path.isdir(dropin_dir) else []
    coordinator = unit_settings(coordinator_unit)
    worker = unit_settings(worker_unit, dropins)
    problems = []
    declared = set(re.findall(r"^g\s+(\S+)", open(os.path.join(unit_dir, "lockstep.sysusers.conf")).read(),
                              re.M))
    for unit, s in (("lockstep-coordinator", coordinator), ("lockstepd@", worker)):
        for g in " ".join(s.get("SupplementaryGroups", [])).split():
            if g not in declared:
                problems.append(f"{unit}: SupplementaryGroups={g} is not in lockstep.sysusers.conf")
    if os.geteuid() != 0:
        return problems, "not root: install-tls.sh's owners and groups cannot be laid out"
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    failed = install(unit_dir, scratch)
    if failed:
        return problems + [failed], None
    problems += evaluate(scratch, coordinator, worker)
    if problems:
        return problems, None
    # The evaluation can fail: a worker in the coordinator's group without the hiding, and
    # a tokens file every user may read.
    leaky = dict(worker, SupplementaryGroups=["lockstep-coordinator"], InaccessiblePaths=[])
    if not any("can read lockstep-coordinator's" in p for p in evaluate(scratch, coordinator, leaky)):
        problems.append("the evaluation missed a worker in the coordinator's group")
    tokens = os.path.join(scratch, flag(coordinator, "tokens_file").lstrip("/"))
    os.chmod(tokens, 0o644)
    if not any("open to every user" in p for p in evaluate(scratch, coordinator, worker)):
        problems.append("the evaluation missed a tokens file every user can read")
    return problems, None

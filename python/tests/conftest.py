"""A real `lockstep local --keep_running` cluster with TLS for the client's tests.

The binaries come from the environment (python/run_tests.sh sets them from the Bazel test's
runfiles) or, when pytest is run by hand from the repository root, from bazel-bin/. The
cluster binds port 0; its address and credentials are what it reports: the "running; ...
--config=PATH" line of its output names the client config it wrote (operator token), and
tls/tokens in its work dir holds the viewer token. It is stopped (SIGINT, then SIGKILL) whatever the
tests do, and dies with pytest should pytest itself be killed (PR_SET_PDEATHSIG; lockstep
local's own children die with it the same way).
"""

import ctypes
import dataclasses
import os
import queue
import re
import signal
import subprocess
import threading
import time
from typing import Iterator, List

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_TIMEOUT_S = 60


def _binary(env_var: str, relative: str) -> str:
    path = os.environ.get(env_var) or os.path.join(REPO, "bazel-bin", relative)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built: `bazel build //{os.path.dirname(relative)}:"
                    f"{os.path.basename(relative)}` (or set {env_var})")
    return path


@dataclasses.dataclass
class Cluster:
    """A running local cluster: its client config (operator), viewer token and work dir."""
    address: str
    config: str
    ca: str
    operator_token: str
    viewer_token: str
    work_dir: str
    digits_csv: str
    output: List[str]


def _read_tokens(path: str) -> "dict[str, str]":
    tokens = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) == 3 and not line.startswith("#"):
                tokens.setdefault(fields[1], fields[0])
    return tokens


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when pytest exits, however it exits."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    lockstep = _binary("LOCKSTEP_BIN", "client/lockstep")
    coordinator = _binary("LOCKSTEP_COORDINATOR_BIN", "coordinator/lockstep-coordinator")
    lockstepd = _binary("LOCKSTEPD_BIN", "worker/lockstepd")
    digits = os.path.realpath(os.environ.get("LOCKSTEP_DIGITS_CSV") or
                              os.path.join(REPO, "examples/data/digits.csv.gz"))
    work_dir = str(tmp_path_factory.mktemp("cluster"))
    proc = subprocess.Popen(
        [lockstep, "local", "--no_job", "--keep_running", "--workers=2",
         f"--work_dir={work_dir}", f"--coordinator_bin={coordinator}",
         f"--lockstepd_bin={lockstepd}", f"--timeout={START_TIMEOUT_S}s"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_die_with_parent)
    lines: "queue.Queue[str]" = queue.Queue()
    output: List[str] = []

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(line)
        lines.put("")  # EOF

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        config = ""
        while not config:
            remaining = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(0.0, remaining))
            except queue.Empty:
                pytest.fail(f"lockstep local did not say it was running within "
                            f"{START_TIMEOUT_S}s:\n{''.join(output)}")
            if line == "":
                pytest.fail(f"lockstep local exited ({proc.wait()}):\n{''.join(output)}")
            output.append(line)
            m = re.match(r"running; .* --config=(\S+)", line)
            config = m.group(1) if m else ""
        settings = dict(line.split(": ", 1) for line in open(config).read().splitlines())
        tokens = _read_tokens(os.path.join(work_dir, "tls", "tokens"))
        yield Cluster(address=settings["coordinator"], config=config, ca=settings["ca"],
                      operator_token=settings["token"], viewer_token=tokens["viewer"],
                      work_dir=work_dir, digits_csv=digits, output=output)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # lockstep local stops workers, then the coordinator
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()  # its children die with it (PDEATHSIG)
                proc.wait(timeout=10)

"""Helpers shared by the deploy checks: where the files are, how to run a command."""
import os
import subprocess
import sys


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def skip(message):
    # Bazel has no skipped state for sh_test: say so loudly and pass.
    print(f"SKIPPED: {message}")
    sys.exit(0)


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


def tmpdir():
    return os.environ.get("TEST_TMPDIR") or os.path.join("/tmp", f"deploy-test-{os.getpid()}")


def binaries(paths):
    """{'lockstepd': '/abs/...', 'lockstep-coordinator': ..., 'lockstep': ...} from argv."""
    return {os.path.basename(p): os.path.abspath(p) for p in paths}


def home():
    # Bazel may point $HOME at the test's own directory; the caches live in the user's.
    import pwd
    return pwd.getpwuid(os.getuid()).pw_dir

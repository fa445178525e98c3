#!/usr/bin/env python3
"""Generates the lockstep package's gRPC and protobuf stubs from proto/, and installs it.

The stubs (lockstep/v1/*_pb2.py, coordinator_pb2_grpc.py) are never committed: they are made
from the repository's proto/ by Debian's protoc (python3-protobuf's code generator) and
grpc_python_plugin (protobuf-compiler-grpc), so they always match the coordinator built from
the same checkout. Bazel's //python:stubs genrule runs this script too.

    python3 python/build_stubs.py            # stubs into python/lockstep/v1/
    python3 python/build_stubs.py --install  # and make `import lockstep` work for this user

--install writes a lockstep.pth into the user's site-packages (or the active virtual
environment's) naming this python/ directory: nothing is copied, no pip is needed, and a
later `git pull` plus this command again keeps the package and its stubs current.
"""

import argparse
import os
import shutil
import site
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# The proto files, relative to proto/ (their import root). coordinator.proto is the one
# with services; the others are the messages it and the checkpoints use.
PROTOS = [
    "lockstep/v1/assignment.proto",
    "lockstep/v1/checkpoint.proto",
    "lockstep/v1/cluster.proto",
    "lockstep/v1/coordinator.proto",
    "lockstep/v1/diagnostics.proto",
    "lockstep/v1/event.proto",
    "lockstep/v1/example.proto",
    "lockstep/v1/graph.proto",
    "lockstep/v1/job.proto",
    "lockstep/v1/job_plan.proto",
    "lockstep/v1/job_spec.proto",
    "lockstep/v1/model.proto",
    "lockstep/v1/tensor.proto",
]
SERVICE_PROTOS = ["lockstep/v1/coordinator.proto"]

INIT_TEXT = '"""Generated from proto/lockstep/v1 by python/build_stubs.py; not committed."""\n'


def find_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        sys.exit(f"build_stubs: {name} not found on PATH; install Debian's protobuf-compiler and "
                 "protobuf-compiler-grpc (tools/bootstrap.sh does)")
    return path


def generate(proto_path: str, out: str) -> None:
    """Writes out/lockstep/v1/*_pb2.py, coordinator_pb2_grpc.py and an __init__.py."""
    protoc = find_tool("protoc")
    plugin = find_tool("grpc_python_plugin")
    os.makedirs(os.path.join(out, "lockstep", "v1"), exist_ok=True)
    missing = [p for p in PROTOS if not os.path.exists(os.path.join(proto_path, p))]
    if missing:
        sys.exit(f"build_stubs: {', '.join(missing)} not under {proto_path}; a proto was renamed? "
                 "update PROTOS in python/build_stubs.py and outs in python/BUILD.bazel")
    cmd = [protoc, f"--proto_path={proto_path}", f"--python_out={out}"] + PROTOS
    subprocess.run(cmd, check=True)
    cmd = [protoc, f"--proto_path={proto_path}", f"--grpc_python_out={out}",
           f"--plugin=protoc-gen-grpc_python={plugin}"] + SERVICE_PROTOS
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "lockstep", "v1", "__init__.py"), "w") as f:
        f.write(INIT_TEXT)


def install() -> str:
    """Writes lockstep.pth naming HERE into the venv's or the user's site-packages."""
    if sys.prefix != sys.base_prefix:  # a virtual environment
        target = sysconfig.get_paths()["purelib"]
    else:
        target = site.getusersitepackages()
    os.makedirs(target, exist_ok=True)
    pth = os.path.join(target, "lockstep.pth")
    with open(pth, "w") as f:
        f.write(HERE + "\n")
    return pth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto_path", default=os.path.join(REPO, "proto"),
                        help="the import root of the .proto files (default: the repo's proto/)")
    parser.add_argument("--out", default=HERE,
                        help="where lockstep/v1/ is written (default: python/ beside this script)")
    parser.add_argument("--install", action="store_true",
                        help="also make `import lockstep` find python/ (a .pth file)")
    args = parser.parse_args()
    generate(args.proto_path, args.out)
    if args.install:
        if os.path.abspath(args.out) != HERE:
            sys.exit("build_stubs: --install needs the stubs beside the package (no --out)")
        print(f"lockstep: {install()} points {sys.executable} at {HERE}")


if __name__ == "__main__":
    main()

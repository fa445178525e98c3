#!/usr/bin/env python3
"""The GPU tests of a source tree, read from its BUILD files (no Bazel needed).

tools/gpu_bundle.sh bundles what `bazel query 'attr(tags, "requires-gpu", tests(//...))'`
finds; this reads the same from the BUILD files, so that a machine without Bazel (the GPU
machine, CI's rehearsal) can tell whether a bundle holds every requires-gpu test, and so that a
test that needs a real GPU but escapes the tag is caught before a GPU run misses it.

  gpu_tests.py list ROOT      the labels of the requires-gpu tests, one a line, sorted
  gpu_tests.py check ROOT     exit 1 naming each test that breaks a rule below
  gpu_tests.py missing ROOT TESTS_TXT
                              exit 1 listing each requires-gpu test of ROOT that the bundle's
                              tests.txt (label, path) lacks; exit 3 when ROOT has none (no
                              source tree there)

A requires-gpu test: a cuda_test (third_party/cuda/cuda.bzl adds the tag) or a *_test whose
tags name "requires-gpu". The rules `check` enforces:
  - a CUDA-only test (target_compatible_with ONLY_WITH_CUDA, or deps on //engine:real_gpu_env
    or //distribute:cuda_gpu_devices) carries the tag: CI only builds --config=cuda, so
    without it the bundle's query leaves it out and it runs nowhere;
  - a requires-gpu test has no data, args or env: the bundle ships the binary alone;
  - the tree has at least one requires-gpu test (a scan that finds none is broken).
BUILD files are Starlark, which Python's parser reads; only literal strings are understood.
"""
import ast
import os
import sys

# Dependencies that mean "runs on a real GPU".
REAL_GPU_DEPS = ("//engine:real_gpu_env", "//distribute:cuda_gpu_devices")
SKIP_DIRS = {".git", "dist", "node_modules"}


def strings(node):
    """Every string literal inside an expression."""
    if node is None:
        return []
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def names(node):
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)] if node is not None else []


def absolute(label, package):
    if label.startswith(":"):
        return "//%s%s" % (package, label)
    if label.startswith("//"):
        return label if ":" in label else "%s:%s" % (label, label.rsplit("/", 1)[-1])
    return "//%s:%s" % (package, label)


def tests(root):
    """Yields (label, rule, kwargs) for every *_test call in the tree's BUILD files."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("bazel-"))
        build = next((f for f in ("BUILD.bazel", "BUILD") if f in filenames), None)
        if build is None:
            continue
        package = os.path.relpath(dirpath, root).replace(os.sep, "/")
        package = "" if package == "." else package
        path = os.path.join(dirpath, build)
        with open(path) as f:
            try:
                tree = ast.parse(f.read(), path)
            except SyntaxError as e:
                raise SystemExit("gpu_tests: cannot read %s: %s" % (path, e))
        for stmt in tree.body:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                continue
            rule = call.func.id
            if not rule.endswith("_test"):
                continue
            kwargs = {k.arg: k.value for k in call.keywords if k.arg}
            name = strings(kwargs.get("name"))
            if not name:
                continue
            yield "//%s:%s" % (package, name[0]), rule, kwargs, package


def requires_gpu(rule, kwargs):
    return rule == "cuda_test" or "requires-gpu" in strings(kwargs.get("tags"))


def gpu_tests(root):
    return sorted(label for label, rule, kwargs, _ in tests(root) if requires_gpu(rule, kwargs))


def problems(root):
    found, out = 0, []
    for label, rule, kwargs, package in tests(root):
        tagged = requires_gpu(rule, kwargs)
        found += tagged
        deps = [absolute(d, package) for d in strings(kwargs.get("deps"))]
        only_cuda = "ONLY_WITH_CUDA" in names(kwargs.get("target_compatible_with")) or any(
            "cuda" in s for s in strings(kwargs.get("target_compatible_with")))
        real = [d for d in deps if d in REAL_GPU_DEPS]
        if not tagged and (only_cuda or real):
            why = "target_compatible_with CUDA" if only_cuda else "it depends on " + ", ".join(real)
            out.append("%s is CUDA-only (%s) but not tagged requires-gpu: CI only builds "
                       "--config=cuda and tools/gpu_bundle.sh takes requires-gpu tests, so it runs "
                       "nowhere; make it a cuda_test" % (label, why))
        if tagged:
            extra = [k for k in ("data", "args", "env") if k in kwargs]
            if extra:
                out.append("%s is requires-gpu with %s: the GPU bundle ships its binary alone "
                           "(tools/gpu_bundle.sh), so it would fail there" % (label, "/".join(extra)))
    if found == 0:
        out.append("no requires-gpu test under %s: the scan is broken or the tree is not Lockstep's" % root)
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "list":
        print("\n".join(gpu_tests(argv[2])))
        return 0
    if len(argv) == 3 and argv[1] == "check":
        bad = problems(argv[2])
        for p in bad:
            print("gpu_tests: " + p, file=sys.stderr)
        return 1 if bad else 0
    if len(argv) == 4 and argv[1] == "missing":
        with open(argv[3]) as f:
            bundled = {line.split()[0] for line in f if line.strip()}
        wanted = gpu_tests(argv[2])
        if not wanted:
            print("gpu_tests: no requires-gpu test under %s" % argv[2], file=sys.stderr)
            return 3
        lacking = [t for t in wanted if t not in bundled]
        for t in lacking:
            print(t)
        return 1 if lacking else 0
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""cuda_configure: the repository @local_cuda, over the CUDA toolkit installed on this machine.

Found at $CUDA_PATH, else /usr/local/cuda. The repository links the toolkit's include/ and
lib/ in and names nvcc by its absolute path (nvcc finds its own headers and nvvm from there).
Without a toolkit the repository still loads, so that `bazel query` and the default (CPU-only)
build never need one; its targets then fail to build, saying where a toolkit was looked for.
Only --config=cuda (--define=cuda=true, //third_party/cuda:enabled) depends on them.
"""

def _cuda_configure_impl(repository_ctx):
    cuda_path = repository_ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = repository_ctx.path(cuda_path + "/bin/nvcc")
    if nvcc.exists:
        repository_ctx.symlink(cuda_path + "/include", "include")
        lib = repository_ctx.path(cuda_path + "/lib64")
        if not lib.exists:
            lib = repository_ctx.path(cuda_path + "/lib")
        repository_ctx.symlink(lib, "lib")
        repository_ctx.file("defs.bzl", "NVCC = %r\nCUDA_FOUND = True\nMISSING = \"\"\n" % str(nvcc))
        repository_ctx.template("BUILD.bazel", repository_ctx.attr._found_build)
    else:
        message = ("--config=cuda needs the CUDA toolkit (nvcc, cudart, NCCL headers): none at " +
                   cuda_path + "; install it there or set CUDA_PATH (bazel --action_env is not " +
                   "enough: export CUDA_PATH before running bazel)")
        repository_ctx.file("defs.bzl", "NVCC = None\nCUDA_FOUND = False\nMISSING = %r\n" % message)
        repository_ctx.template(
            "BUILD.bazel",
            repository_ctx.attr._missing_build,
            substitutions = {"%{MESSAGE}": message},
        )

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
    attrs = {
        "_found_build": attr.label(default = "//third_party/cuda:BUILD.found.tpl"),
        "_missing_build": attr.label(default = "//third_party/cuda:BUILD.missing.tpl"),
    },
)

"""cuda_library and cuda_test: CUDA code in Lockstep's Bazel build.

cuda_library compiles its .cu files with nvcc (one object each, position-independent, for
CUDA_ARCHS: sm_90 machine code for H100/H200 plus compute_90 PTX, which the driver compiles for
newer GPUs) and wraps them, with its .cc files, in a cc_library linked with the static CUDA
runtime. Such targets build only under --config=cuda (//third_party/cuda:enabled); elsewhere they
are incompatible, so `bazel build //...` and `bazel test //...` skip them and the default build
needs no toolkit. Code that also builds without CUDA selects on :enabled instead.
"""

load("@local_cuda//:defs.bzl", "MISSING", "NVCC")
load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")
load("//third_party/cuda:flags.bzl", "ONLY_WITH_CUDA")

# (virtual architecture, real architecture): code for sm_90, and PTX of compute_90 for the rest.
CUDA_ARCHS = [
    ("compute_90", "sm_90"),
    ("compute_90", "compute_90"),
]

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall",
    "-Xcompiler=-Wno-sign-compare",
    "--expt-relaxed-constexpr",
]

def _cuda_objects_impl(ctx):
    if NVCC == None:
        fail("cuda_library %s: %s" % (ctx.label, MISSING))
    cc = [d[CcInfo].compilation_context for d in ctx.attr.deps]
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in cc])
    args = list(NVCC_FLAGS)
    for virtual, real in CUDA_ARCHS:
        args.append("-gencode=arch=%s,code=%s" % (virtual, real))
    args += ["-I.", "-I" + ctx.bin_dir.path, "-I" + ctx.genfiles_dir.path]
    for c in cc:
        args += ["-I" + p for p in c.includes.to_list() + c.quote_includes.to_list()]
        for p in c.system_includes.to_list():
            args += ["-isystem", p]
        args += ["-D" + d for d in c.defines.to_list()]
    args += ctx.attr.copts
    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.pic.o" % (ctx.label.name, src.basename[:-len(".cu")]))
        ctx.actions.run(
            executable = NVCC,
            arguments = args + ["-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "Compiling CUDA %s" % src.short_path,
            use_default_shell_env = True,
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs = [], hdrs = [], deps = [], copts = [], nvcc_copts = [], **kwargs):
    """A cc_library whose .cu sources nvcc compiles; built only under --config=cuda.

    Args:
      name: the cc_library's name.
      srcs: .cu files (for nvcc) and .cc files (for the C++ compiler).
      hdrs: headers, visible to both.
      deps: cc_library dependencies, visible to both.
      copts: options of the C++ compiler.
      nvcc_copts: options of nvcc.
      **kwargs: passed to cc_library (visibility, tags, ...).
    """
    cu = [s for s in srcs if s.endswith(".cu")]
    cc = [s for s in srcs if not s.endswith(".cu")]
    cuda_deps = deps + ["@local_cuda//:cudart_static"]
    if cu:
        _cuda_objects(
            name = name + "_cu",
            srcs = cu,
            hdrs = hdrs,
            deps = cuda_deps,
            copts = nvcc_copts,
            target_compatible_with = ONLY_WITH_CUDA,
            visibility = ["//visibility:private"],
            tags = kwargs.get("tags", []),
        )
        cc = cc + [":" + name + "_cu"]
    cc_library(
        name = name,
        srcs = cc,
        hdrs = hdrs,
        deps = cuda_deps,
        copts = copts,
        target_compatible_with = ONLY_WITH_CUDA,
        **kwargs
    )

def cuda_test(name, tags = [], **kwargs):
    """A cc_test that needs a GPU: tagged requires-gpu and built only under --config=cuda.

    CI builds it (tools/test.sh); `bazel test --config=cuda` runs it where a GPU is.
    """
    cc_test(
        name = name,
        tags = tags + ["requires-gpu"],
        target_compatible_with = ONLY_WITH_CUDA,
        **kwargs
    )

"""Proto and gRPC C++ code generation with the system protoc and grpc_cpp_plugin.

Bazel cannot download rules_proto or gRPC's rules here, so a genrule runs Debian's
protoc (3.21) and grpc_cpp_plugin (1.51). Imports are relative to proto/, as in
`import "lockstep/v1/tensor.proto";`, and C++ code includes "lockstep/v1/x.pb.h".
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def ls_proto_library(name, srcs = [], deps = [], grpc_srcs = [], visibility = None):
    """Generates a cc_library `name` for `srcs` (messages) and `grpc_srcs` (services).

    Args:
      name: the cc_library's name.
      srcs: .proto files with messages only, relative to this package.
      deps: other ls_proto_library targets these import.
      grpc_srcs: .proto files with services; their gRPC stubs are generated too.
      visibility: of the cc_library.
    """
    all_srcs = srcs + grpc_srcs
    outs = []
    for s in all_srcs:
        base = s[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
    for s in grpc_srcs:
        base = s[:-len(".proto")]
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]

    # Every .proto under proto/ is an input, so imports between libraries resolve.
    pkg = native.package_name()
    cmd = "protoc --proto_path={pkg} --cpp_out=$(GENDIR)/{pkg} ".format(pkg = pkg)
    cmd += " ".join(["{}/{}".format(pkg, s) for s in srcs + grpc_srcs])
    if grpc_srcs:
        cmd += " && protoc --proto_path={pkg} --grpc_out=$(GENDIR)/{pkg} ".format(pkg = pkg)
        cmd += "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) "
        cmd += " ".join(["{}/{}".format(pkg, s) for s in grpc_srcs])

    native.genrule(
        name = name + "_codegen",
        srcs = all_srcs + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = cmd,
        message = "protoc " + name,
    )
    native.filegroup(
        name = name + "_srcs",
        srcs = all_srcs + [d + "_srcs" for d in deps],
    )
    lib_deps = ["//third_party:protobuf"]
    if grpc_srcs:
        lib_deps.append("//third_party:grpc++")
    cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        copts = ["-Wno-unused-parameter"],
        deps = deps + lib_deps,
        visibility = visibility,
    )

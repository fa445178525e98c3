"""lockstep_fuzz_target: one fuzz target, built two ways.

`<name>` is the fuzzer binary: under --config=fuzz (clang, tools/fuzz.sh) it links libFuzzer's
main; in the ordinary build it links replay_main.cc and replays the files it is given.
`<name>_replay` is a cc_test that replays the committed seed corpus fuzz/corpus/<name>/, so
that `bazel test //...` (gcc, no clang needed) runs every seed input on every change.
"""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

def lockstep_fuzz_target(name, srcs, deps):
    cc_library(
        name = name + "_target",
        srcs = srcs,
        deps = deps,
        alwayslink = 1,
    )
    cc_binary(
        name = name,
        deps = [":" + name + "_target"] + select({
            "//fuzz:fuzzing": [],
            "//conditions:default": ["//fuzz:replay_main"],
        }),
        linkopts = select({
            "//fuzz:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    cc_test(
        name = name + "_replay",
        size = "small",
        args = ["fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
        deps = [
            ":" + name + "_target",
            "//fuzz:replay_main",
        ],
    )

"""Selects on --config=cuda (//third_party/cuda:enabled), loadable without the toolkit."""

# local_defines of a target whose code builds either way and asks `#ifdef LOCKSTEP_WITH_CUDA`.
# Local, not `defines`: a define that reached every dependent would make the CUDA build
# recompile them all.
WITH_CUDA_DEFINES = select({
    "//third_party/cuda:enabled": ["LOCKSTEP_WITH_CUDA"],
    "//conditions:default": [],
})

ONLY_WITH_CUDA = select({
    "//third_party/cuda:enabled": [],
    "//conditions:default": ["@platforms//:incompatible"],
})

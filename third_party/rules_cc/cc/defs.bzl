"""A minimal rules_cc: forwards every rule to Bazel's native C++ rules.

Debian's bazel-rules-cc needs a newer Bazel than Debian's bazel-bootstrap 4.2, and Bazel
cannot download anything here, so this shim stands in for it.
"""

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

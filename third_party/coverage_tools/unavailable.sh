#!/bin/sh
echo "coverage tools are not available offline; Lockstep does not use bazel coverage" >&2
exit 1

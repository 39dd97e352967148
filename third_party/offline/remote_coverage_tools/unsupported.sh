#!/bin/sh
echo "coverage is not supported in the offline Bazel setup (remote_coverage_tools is a stand-in)" >&2
exit 1

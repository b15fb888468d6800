#!/usr/bin/env bash
# examples/workspace/test.sh [BAZEL_FLAG...]: builds this workspace (decodekit used as
# the external repository @decodekit) and runs its tests, with decodekit's own
# ../../bazelw (the Debian packages, the pinned wheels, Bazel 4.2.3). Every target is
# analyzed first (`build --nobuild`: a label in decodekit's macros that does not
# resolve from here fails, :profile and :generate included); then the tests and what
# they need are built and run (--build_tests_only: not the profile and generate tools,
# which cost minutes of compiling and are analyzed above).
#
# The output base is Bazel's default for this workspace, so a second run is
# incremental; BAZELW_OUTPUT_USER_ROOT=DIR gives a fresh one (.ci/run does, and adds
# --disk_cache= so that every action runs). Flags are passed to both commands.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
../../bazelw build --nobuild //... "$@"
exec ../../bazelw test //... --build_tests_only "$@"

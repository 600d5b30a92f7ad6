#!/usr/bin/env bash
# Sets up (Debian packages), checks formatting, builds the test preset (warnings are errors) and
# runs every test through ctest, then the fuzz stage (scripts/fuzz.sh --ci: its own clang build in
# build/fuzz-ci, every fuzz corpus replayed, each fuzzer run 8 s; docs/fuzzing.md; skipped with a
# message when clang's libFuzzer is missing, or with CRUX_SKIP_FUZZ=1). Exits non-zero on any
# failure.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
scripts/format_check.sh
cmake --preset test
cmake --build --preset test -j "$(nproc)"
ctest --preset test -j "$(nproc)"
if [[ ${CRUX_SKIP_FUZZ:-0} == 1 ]]; then
  echo "fuzz: SKIPPED (CRUX_SKIP_FUZZ=1)"
else
  scripts/fuzz.sh --ci
fi

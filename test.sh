#!/usr/bin/env bash
# Sets up (Debian packages), checks formatting, builds the test preset (warnings are errors) and
# runs every test through ctest. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
scripts/format_check.sh
cmake --preset test
cmake --build --preset test -j "$(nproc)"
ctest --preset test -j "$(nproc)"

#!/usr/bin/env bash
# Sets up (Debian packages), builds in Release and runs the main job: the offline planner on the
# shipped example cluster, printed as a table. Extra arguments go to crux-plan
# (e.g. ./run.sh --format json).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
exec build/release/tools/plan/crux-plan \
  --topology configs/topologies/example_clos2.yaml \
  --jobs configs/jobs/example_clos2.yaml \
  --format table "$@"

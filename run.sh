#!/usr/bin/env bash
# The main job: sets up (Debian packages), builds in Release and starts cruxd, the Crux
# scheduling daemon, in the foreground on its built-in defaults:
#   * topology: the embedded example two-tier Clos (configs/topologies/example_clos2.yaml),
#   * state: SQLite under ./state/ (kept across runs; delete the folder to start afresh),
#   * client endpoint tcp://127.0.0.1:7450 (plain TCP on loopback, no CurveZMQ: lab mode),
#   * admin socket ./state/admin.sock (what cruxctl uses by default from this folder),
#   * Prometheus metrics on http://127.0.0.1:9464/metrics.
# Extra arguments go to cruxd (e.g. ./run.sh --config configs/cruxd.yaml). Stop with Ctrl-C.
# The step-by-step walkthrough (load generator, cruxctl) is docs/walkthrough.md.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

bin=build/release
for exe in daemon/cruxd tools/cruxctl/cruxctl tools/loadgen/crux-loadgen; do
  if [[ ! -x $bin/$exe ]]; then
    echo "run.sh: $bin/$exe was not built" >&2
    exit 1
  fi
done
mkdir -p state

cat >&2 <<MSG
--------------------------------------------------------------------------------------------
cruxd is starting in the foreground (Ctrl-C stops it; state persists in ./state/).
In another terminal, from $(pwd):

  # play 8 training jobs' clients over ZeroMQ (register, profile reports, heartbeats)
  $bin/tools/loadgen/crux-loadgen --endpoint tcp://127.0.0.1:7450 --insecure \\
      --topology configs/topologies/example_clos2.yaml --jobs 8 --duration-s 600

  # watch the plan: intensity I_j, priority P_j, rank, level per job
  watch -n1 $bin/tools/cruxctl/cruxctl jobs
  $bin/tools/cruxctl/cruxctl job <ID>          # why a job has its level, paths, contention
  $bin/tools/cruxctl/cruxctl set-link tor0-agg0 down && $bin/tools/cruxctl/cruxctl jobs
  $bin/tools/cruxctl/cruxctl status --json

Walkthrough: docs/walkthrough.md
--------------------------------------------------------------------------------------------
MSG
exec "$bin/daemon/cruxd" "$@"

#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 14, "Where priorities matter" (issue #30 item 3): the
# priority-regime scenario families (configs/scenarios/prio_*.yaml) under every policy of the
# comparison, for several trace seeds, at 8 levels and, for the oversubscribed families, at 3
# (level 0 is reserved for profiling newcomers, so 2 job levels: more contending jobs than
# queues). One `crux-sim run` per (scenario, seed, levels, policy)
# through scripts/eval_fig23.sh; then scripts/eval_table.py --priorities prints the table.
#
#   scripts/eval_priorities.sh [--build DIR] [--out DIR] [--seeds "1 2 3"] [--horizon-s H]
#                              [-j N]
#
# Defaults: --build build/test, --out eval-prio, seeds 1 2 3, the scenarios' one day, -j 2.
# The trace seed is the scenario's generate.seed: each seed gets its own copy of the scenario
# under OUT/scenarios/ (absolute paths). The llm-2025 rows run the single-overlap summary.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/test
out=eval-prio
seeds="1 2 3"
horizon=""
jobs=2
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --horizon-s) horizon=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "eval_priorities.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out/scenarios"
root=$(pwd)
eight=()
few=()
for base in configs/scenarios/prio_*.yaml; do
  name=$(basename "$base" .yaml)
  for s in $seeds; do
    f="$out/scenarios/${name}_s$s.yaml"
    # The generator's seed, and paths made absolute (the copy lives elsewhere).
    sed -e "s|generate: {seed: [0-9]*|generate: {seed: $s|" \
        -e "s|\.\./topologies/|$root/configs/topologies/|" \
        -e "s|\.\./models.yaml|$root/configs/models.yaml|" "$base" > "$f"
    eight+=("$f")
    [[ $name == *os8* ]] && few+=("$f")
  done
done
args=(--build "$build" -j "$jobs")
[[ -n $horizon ]] && args+=(--horizon-s "$horizon")
rc=0
scripts/eval_fig23.sh "${args[@]}" --out "$out/levels8" \
    --extra "--no-plots --single-overlap" "${eight[@]}" > "$out/levels8.log" || rc=1
scripts/eval_fig23.sh "${args[@]}" --out "$out/levels3" \
    --policies crux,crux-ps,crux-ps-pa,crux-guard,crux-pa,ecmp,sincronia,ideal \
    --extra "--no-plots --single-overlap --levels 3" "${few[@]}" > "$out/levels3.log" || rc=1
echo "8 levels ($(git rev-parse --short HEAD)):"
/usr/bin/python3 scripts/eval_table.py --priorities "$out/levels8"
echo
echo "3 levels (2 for jobs):"
/usr/bin/python3 scripts/eval_table.py --priorities "$out/levels3"
exit $rc

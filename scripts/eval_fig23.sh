#!/usr/bin/env bash
# Runs the Fig. 23-style evaluation matrix of docs/evaluation.md: every scenario under every
# policy, one `crux-sim run` each (in parallel, -j), then one markdown table per scenario and a
# summary of the headline ratios (scripts/eval_table.py). Results land in OUT/<scenario>/<policy>/
# (summary.json, CSVs, time.txt, run.json: scripts/eval_lib.sh) and OUT/<scenario>/table.md,
# OUT/headline.md. Section scripts (scripts/eval_s*.sh) build on it or on the same library.
#
#   scripts/eval_fig23.sh [--horizon-s H] [--policies a,b,...] [--extra "crux-sim flags"]
#                         [common options] SCENARIO.yaml...
#
# Defaults: the scenario's own horizon and policies. A run that fails is reported and the others
# go on; the script exits 1 if any failed.
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-out "$@"
horizon=""
policies=""
extra=""
scenarios=()
set -- "${EVAL_ARGS[@]}"
while (($#)); do
  case "$1" in
    --horizon-s) horizon=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    -*) echo "eval_fig23.sh: unknown option $1" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
((${#scenarios[@]})) || { echo "eval_fig23.sh: no scenario given" >&2; exit 2; }
[[ -n $horizon ]] && extra="$extra --horizon-s $horizon"
eval_add_scenarios "" "$policies" "$extra" "${scenarios[@]}"
rc=0
eval_go || rc=1
for sc in "${scenarios[@]}"; do
  name=$(basename "$sc" .yaml)
  eval_table "$EVAL_OUT/$name" > "$EVAL_OUT/$name/table.md" || rc=1
done
eval_table --headline "$EVAL_OUT" > "$EVAL_OUT/headline.md" || rc=1
cat "$EVAL_OUT/headline.md"
exit $rc

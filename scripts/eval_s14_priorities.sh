#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 14, "Where priorities matter" (issue #30 item 3):
#   (default)   the priority-regime scenario families (configs/scenarios/prio_*.yaml) under every
#               policy of the comparison, for several trace seeds, at 8 levels and, for the
#               oversubscribed families, at 3 (level 0 is reserved for profiling newcomers, so 2
#               job levels: more contending jobs than queues); cruxd's control loop, hybrid jobs
#               as their single-overlap summary; OUT/levels8/, OUT/levels3/;
#   --small N   also the small contended cases: scripts/eval_small_cases.py with N cases per
#               seed (the section uses 100), OUT/small-s<seed>/.
# Prints the priorities table (scripts/eval_table.py --priorities) per level count.
#
#   scripts/eval_s14_priorities.sh [--seeds "1 2 3"] [--horizon-s H] [--small N]
#                                  [common options]
#
# Defaults: seeds 1 2 3, the scenarios' one day. The trace seed is the scenario's generate.seed:
# each seed gets its own copy of the scenario under OUT/scenarios/ (absolute paths).
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s14 "$@"
seeds="1 2 3"
horizon=""
small=0
set -- "${EVAL_ARGS[@]}"
while (($#)); do
  case "$1" in
    --seeds) seeds=$2; shift 2 ;;
    --horizon-s) horizon=$2; shift 2 ;;
    --small) small=$2; shift 2 ;;
    *) echo "eval_s14_priorities.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$EVAL_OUT/scenarios"
root=$(pwd)
eight=()
few=()
for base in configs/scenarios/prio_*.yaml; do
  name=$(basename "$base" .yaml)
  for s in $seeds; do
    copy="$EVAL_OUT/scenarios/${name}_s$s.yaml"
    # The generator's seed, and paths made absolute (the copy lives elsewhere).
    sed -e "s|generate: {seed: [0-9]*|generate: {seed: $s|" \
        -e "s|\.\./topologies/|$root/configs/topologies/|" \
        -e "s|\.\./models.yaml|$root/configs/models.yaml|" "$base" > "$copy"
    eight+=("$copy")
    [[ $name == *os8* ]] && few+=("$copy")
  done
done
extra="--single-overlap"
[[ -n $horizon ]] && extra="$extra --horizon-s $horizon"
eval_add_scenarios levels8/ "" "$extra" "${eight[@]}"
eval_add_scenarios levels3/ crux,crux-ps,crux-ps-pa,crux-guard,crux-pa,ecmp,sincronia,ideal \
    "$extra --levels 3" "${few[@]}"
rc=0
eval_go || rc=1
echo "8 levels (commit $EVAL_COMMIT):"
eval_table --priorities "$EVAL_OUT/levels8"
echo
echo "3 levels (2 for jobs):"
eval_table --priorities "$EVAL_OUT/levels3"
if ((small)); then
  for s in $seeds; do
    /usr/bin/python3 scripts/eval_small_cases.py --build "$EVAL_BUILD" --out "$EVAL_OUT/small-s$s" \
        --cases "$small" --seed "$s" -j "$EVAL_JOBS" || rc=1
  done
fi
exit $rc

#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 7, "Two-week trace: wall time": the two-week
# Lingjun-calibrated trace (seed 1, scatter 0.5) on the 2k Clos (1:1), run to its last job's end,
# oracle planning, one run per policy (default crux, ideal, sincronia as in the section; --all for
# every policy of the comparison). Hours of CPU: run it on a machine of its own.
#
#   scripts/eval_s07_two_weeks.sh [--all] [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s07 "$@"
policies=(crux ideal sincronia)
for a in "${EVAL_ARGS[@]}"; do
  case "$a" in
    --all) policies=(crux crux-ps-pa crux-pa ecmp sincronia taccl cassini ideal) ;;
    *) echo "eval_s07_two_weeks.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
clos=configs/topologies/crux_clos2_2k_os1.yaml
eval_trace two-weeks --days 14 --seed 1 --scatter 0.5 --topology "$clos"
for p in "${policies[@]}"; do
  eval_add "$p" run --topology "$clos" --trace "$(eval_trace_csv two-weeks)" --policy "$p" \
      --oracle --no-plots --quiet
done
rc=0
eval_go || rc=1
echo "Section 7 (commit $EVAL_COMMIT):"
eval_table --runs "$EVAL_OUT"
exit $rc

#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 6, "Fast-forward vs full simulation": the Clos main
# scenario (fig23_clos2_main, one-day trace, seed 1), first 2 h, oracle planning, crux-pa and crux,
# each with fast-forward and with --no-fast-forward. Prints one row per run (GPU / work
# utilisation, slowdowns, events, CPU s, peak RSS, commit); the iterations completed are in each
# run's summary.json.
#
#   scripts/eval_s06_fast_forward.sh [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s06 "$@"
eval_no_args
sc=configs/scenarios/fig23_clos2_main.yaml
for p in crux-pa crux; do
  for mode in fast-forward full; do
    extra=()
    [[ $mode == full ]] && extra=(--no-fast-forward)
    eval_add "$p-$mode" run --scenario "$sc" --policy "$p" --oracle --horizon-s 7200 --no-plots \
        --quiet "${extra[@]}"
  done
done
rc=0
eval_go || rc=1
echo "Section 6 (commit $EVAL_COMMIT):"
eval_table --runs "$EVAL_OUT"
exit $rc

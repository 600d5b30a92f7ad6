#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 9, "The real control loop vs the oracle": each run once
# with --oracle (every job planned from its true profile at once) and once through cruxd's
# control loop (the default: registration, profiling, debounce, stable re-planning); crux also
# through the loop with --no-stable (every job re-planned at every event):
#   clos_main  fig23_clos2_main, 24 h, crux;
#   clos_os4   the 2k Clos at 4:1 (one-day trace, seed 1, scatter 0.5), 6 h, crux and ecmp.
# Prints one row per run (GPU utilisation, mean slowdown, events, CPU s, commit); the mean
# profiling time is summary.json's mean_profiling_s.
#
#   scripts/eval_s09_control_loop.sh [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s09 "$@"
eval_no_args
os4=configs/topologies/crux_clos2_2k_os4.yaml
eval_trace os4 --days 1 --seed 1 --scatter 0.5 --topology "$os4"
for mode in oracle loop loop-no-stable; do
  extra=(--no-plots --quiet)
  [[ $mode == oracle ]] && extra+=(--oracle)
  [[ $mode == loop-no-stable ]] && extra+=(--no-stable)
  eval_add "clos_main/crux-$mode" run --scenario configs/scenarios/fig23_clos2_main.yaml \
      --policy crux --horizon-s 86400 "${extra[@]}"
  policies=(crux ecmp)
  [[ $mode == loop-no-stable ]] && policies=(crux)
  for p in "${policies[@]}"; do
    eval_add "clos_os4/$p-$mode" run --topology "$os4" --trace "$(eval_trace_csv os4)" \
        --policy "$p" --horizon-s 21600 "${extra[@]}"
  done
done
rc=0
eval_go || rc=1
echo "Section 9 (commit $EVAL_COMMIT):"
eval_table --runs "$EVAL_OUT"
exit $rc

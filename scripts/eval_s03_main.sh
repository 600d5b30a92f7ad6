#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 3, "Main setting: results": oracle planning (--oracle,
# as the section was measured), every policy of the scenarios, on
#   clos_main    fig23_clos2_main (2k Clos 1:1, scatter 0.5, one-day trace seed 1), 24 h;
#   clos_packed  the same trace generator without scatter (packed placement), 24 h;
#   dualtor_main fig23_dualtor3_main, 24 h.
# Prints the matrix (GPU utilisation per policy), then per row the policy table (utilisation
# against ideal, crux / policy, slowdowns, events, CPU s, commit). With --quick every horizon is
# 6 h.
#
#   scripts/eval_s03_main.sh [--quick] [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s03 "$@"
day=86400
for a in "${EVAL_ARGS[@]}"; do
  case "$a" in
    --quick) day=21600 ;;
    *) echo "eval_s03_main.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
policies=(crux crux-ps-pa crux-pa ecmp sincronia taccl cassini ideal)
clos=configs/topologies/crux_clos2_2k_os1.yaml
eval_trace packed --days 1 --seed 1 --topology "$clos"
for p in "${policies[@]}"; do
  common=(--policy "$p" --oracle --no-plots --quiet)
  eval_add "clos_main/$p" run --scenario configs/scenarios/fig23_clos2_main.yaml \
      --horizon-s "$day" "${common[@]}"
  eval_add "clos_packed/$p" run --topology "$clos" --trace "$(eval_trace_csv packed)" \
      --horizon-s "$day" "${common[@]}"
  eval_add "dualtor_main/$p" run --scenario configs/scenarios/fig23_dualtor3_main.yaml \
      --horizon-s "$day" "${common[@]}"
done
rc=0
eval_go || rc=1
echo "Section 3 (commit $EVAL_COMMIT):"
eval_table --matrix "$EVAL_OUT"
for row in clos_main clos_packed dualtor_main; do
  echo
  eval_table "$EVAL_OUT/$row"
done
exit $rc

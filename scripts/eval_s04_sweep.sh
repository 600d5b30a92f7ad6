#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 4, "Sensitivity sweep": each row changes one setting of
# the Clos main setting (or the dual-ToR one); first 6 h of a one-day trace (seed 1), oracle
# planning, policies crux, crux-pa, ecmp, sincronia, taccl, cassini, ideal. Rows:
#   01-clos-main, 02-clos-scatter1, 03-clos-load0.8, 04-clos-load0.95, 05-clos-uplinks1to2,
#   06-clos-uplinks2to1, 07-clos-uplinks4to1, 08-clos-no-overlap, 09-clos-4to1-no-overlap,
#   10-dualtor-main, 11-dualtor-scatter1, 12-dualtor-no-overlap.
# Prints the matrix (one row per setting, its CPU seconds and commit) and one row per run.
#
#   scripts/eval_s04_sweep.sh [--rows "01-clos-main 10-dualtor-main ..."] [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s04 "$@"
only=""
set -- "${EVAL_ARGS[@]}"
while (($#)); do
  case "$1" in
    --rows) only=" $2 "; shift 2 ;;
    *) echo "eval_s04_sweep.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
t=configs/topologies
# row | topology | gen-trace options | run options
rows=(
  "01-clos-main|crux_clos2_2k_os1|--scatter 0.5|"
  "02-clos-scatter1|crux_clos2_2k_os1|--scatter 1|"
  "03-clos-load0.8|crux_clos2_2k_os1|--scatter 0.5 --load 0.8|"
  "04-clos-load0.95|crux_clos2_2k_os1|--scatter 0.5 --load 0.95|"
  "05-clos-uplinks1to2|crux_clos2_2k|--scatter 0.5|"
  "06-clos-uplinks2to1|crux_clos2_2k_os2|--scatter 0.5|"
  "07-clos-uplinks4to1|crux_clos2_2k_os4|--scatter 0.5|"
  "08-clos-no-overlap|crux_clos2_2k_os1|--scatter 0.5|--overlap-start 1"
  "09-clos-4to1-no-overlap|crux_clos2_2k_os4|--scatter 0.5|--overlap-start 1"
  "10-dualtor-main|crux_dualtor3_2k|--scatter 0.5|"
  "11-dualtor-scatter1|crux_dualtor3_2k|--scatter 1|"
  "12-dualtor-no-overlap|crux_dualtor3_2k|--scatter 0.5|--overlap-start 1"
)
for r in "${rows[@]}"; do
  IFS='|' read -r name topo gen run <<< "$r"
  [[ -n $only && $only != *" $name "* ]] && continue
  # shellcheck disable=SC2086
  eval_trace "$name" --days 1 --seed 1 $gen --topology "$t/$topo.yaml"
  for p in crux crux-pa ecmp sincronia taccl cassini ideal; do
    # shellcheck disable=SC2086
    eval_add "$name/$p" run --topology "$t/$topo.yaml" --trace "$(eval_trace_csv "$name")" \
        --policy "$p" --oracle --horizon-s 21600 --no-plots --quiet $run
  done
done
rc=0
eval_go || rc=1
echo "Section 4 (commit $EVAL_COMMIT):"
eval_table --matrix "$EVAL_OUT"
echo
eval_table --runs "$EVAL_OUT"
exit $rc

#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 2's calibration of the scatter knob: the two-week
# Lingjun-calibrated trace (seed 1) placed on the 2k Clos (1:1) and the 2k dual-ToR fabric with a
# share P of the multi-host jobs scattered over random free hosts, P = 0, 0.25, 0.5, 0.75, 1.
# Prints, per trace, the share of jobs (and of their GPUs) that may contend. gen-trace only: a
# few seconds in all.
#
#   scripts/eval_s02_scatter.sh [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s02 "$@"
eval_no_args
for fabric in crux_clos2_2k_os1 crux_dualtor3_2k; do
  for p in 0.00 0.25 0.50 0.75 1.00; do
    eval_trace "$fabric-scatter$p" --days 14 --seed 1 --scatter "$p" \
        --topology "configs/topologies/$fabric.yaml"
  done
done
((EVAL_DRY)) && exit 0
echo "Section 2, scatter calibration (commit $EVAL_COMMIT):"
eval_table --traces "$EVAL_OUT/traces"

#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 12, "The issue #16 re-run": cruxd's control loop with its
# defaults, hybrid jobs as their single-overlap summary.
#   (default)      every scenario of the section, every policy it lists, first 6 h, plus the
#                  crux-guard and crux-pa-guard variants: OUT/six-hours/<scenario>/<policy>;
#                  prints the per-policy GPU / work utilisation (matrix) and the headline ratios;
#   --two-weeks    the "Two weeks" runs: the scenarios' generators stretched to 14 days, cut at
#                  336 h, crux, ecmp and ideal (every policy on fig23_clos2_main):
#                  OUT/two-weeks/...; about an hour of CPU per llm-2025 run;
#   --phase-level  the phase-level check: llm2025_clos2_os4, first 2 h, crux and ecmp with phases
#                  and with the single-overlap summary: OUT/phase-level/...; about a minute of
#                  CPU per phase-level run since bundles (issue #30 item 1);
#   --phase-six-hours
#                  the 6 h matrix of the llm-2025 scenarios with their hybrid jobs at phase
#                  level (no --single-overlap), every policy the scenario lists:
#                  OUT/phase-six-hours/<scenario>/<policy>; PHASE_SCENARIOS (names, space
#                  separated) narrows the scenarios; minutes of CPU per run. With the 6 h
#                  single-overlap matrix present (OUT/six-hours), the two are compared.
# Several of the three may be given; with one of the last two the 6 h matrix is left out unless
# --six-hours is given as well.
#
#   scripts/eval_s12_rerun.sh [--six-hours] [--two-weeks] [--phase-level] [--phase-six-hours]
#       [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s12 "$@"
six=0
two=0
phase=0
phase6=0
for a in "${EVAL_ARGS[@]}"; do
  case "$a" in
    --six-hours) six=1 ;;
    --two-weeks) two=1 ;;
    --phase-level) phase=1 ;;
    --phase-six-hours) phase6=1 ;;
    *) echo "eval_s12_rerun.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
((two || phase || phase6)) || six=1
sc=configs/scenarios
all=("$sc"/fig23_clos2_main.yaml "$sc"/fig23_dualtor3_main.yaml "$sc"/lingjun2023_*.yaml
     "$sc"/llm2025_clos2_os1.yaml "$sc"/llm2025_clos2_os4.yaml "$sc"/llm2025_dualtor3.yaml
     "$sc"/llm2025_hpn_os1.yaml "$sc"/llm2025_hpn_os15.yaml "$sc"/llm2025_meta_os1.yaml
     "$sc"/llm2025_meta_os7.yaml)
if ((six)); then
  eval_add_scenarios six-hours/ "" "--horizon-s 21600 --single-overlap" "${all[@]}"
  eval_add_scenarios six-hours/ crux-guard,crux-pa-guard "--horizon-s 21600 --single-overlap" \
      "${all[@]}"
fi
if ((two)); then
  weeks="--days 14 --horizon-s 1209600 --single-overlap"
  eval_add_scenarios two-weeks/ "" "$weeks" "$sc/fig23_clos2_main.yaml"
  eval_add_scenarios two-weeks/ crux,ecmp,ideal "$weeks" "$sc/lingjun2023_clos2_os4.yaml" \
      "$sc/fig23_dualtor3_main.yaml" "$sc/lingjun2023_hpn_os15.yaml" \
      "$sc/lingjun2023_meta_os7.yaml" "$sc/llm2025_clos2_os1.yaml" "$sc/llm2025_clos2_os4.yaml" \
      "$sc/llm2025_hpn_os15.yaml" "$sc/llm2025_meta_os7.yaml"
fi
if ((phase)); then
  eval_add_scenarios phase-level/phases- crux,ecmp "--horizon-s 7200" "$sc/llm2025_clos2_os4.yaml"
  eval_add_scenarios phase-level/single-overlap- crux,ecmp "--horizon-s 7200 --single-overlap" \
      "$sc/llm2025_clos2_os4.yaml"
fi
if ((phase6)); then
  names=${PHASE_SCENARIOS:-llm2025_clos2_os1 llm2025_clos2_os4 llm2025_dualtor3 llm2025_hpn_os1 \
llm2025_hpn_os15 llm2025_meta_os1 llm2025_meta_os7}
  for n in $names; do
    eval_add_scenarios phase-six-hours/ "" "--horizon-s 21600" "$sc/$n.yaml"
  done
fi
rc=0
eval_go || rc=1
for part in six-hours two-weeks phase-level phase-six-hours; do
  [[ -d $EVAL_OUT/$part ]] || continue
  echo "Section 12, $part (commit $EVAL_COMMIT):"
  eval_table --matrix "$EVAL_OUT/$part"
  echo
  [[ $part == six-hours || $part == phase-six-hours ]] && {
    eval_table --headline "$EVAL_OUT/$part"
    echo
  }
done
if [[ -d $EVAL_OUT/six-hours && -d $EVAL_OUT/phase-six-hours ]]; then
  echo "Section 12, single-overlap summary against phase level (6 h):"
  eval_table --fidelity "$EVAL_OUT/six-hours" "$EVAL_OUT/phase-six-hours"
fi
exit $rc

#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 13, "Sprayed multi-plane fabrics": the llm-2025 mix on
# the 8-plane 2-tier fabric, cruxd's control loop, first 6 h, hybrid jobs as their single-overlap
# summary, ecmp, crux and ideal, each pinned and sprayed (--spray):
#   t1         the scenario's own trace (llm2025_multiplane8: seed 1, pack-then-spill 0.6);
#   t2         the same generator with seed 2;
#   t3-os4     scatter 0.5 on the 4:1 fabric (llm2025_multiplane8_os4), also sprayed over at
#              most 8 paths (--spray-max-paths 8). Its every-path sprayed runs take minutes each.
# Prints the matrix (rows <trace>-<pinned|sprayed|sprayed8>) and one row per run.
#
#   scripts/eval_s13_spray.sh [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s13 "$@"
eval_no_args
sc=configs/scenarios
topo=configs/topologies
eval_trace t2 --seed 2 --days 1 --load 0.58 --spill 0.6 --mix llm-2025 \
    --topology "$topo/multiplane8_2tier.yaml" --gpus-per-host 8
eval_trace t3-os4 --seed 1 --days 1 --load 0.58 --scatter 0.5 --mix llm-2025 \
    --topology "$topo/multiplane8_2tier_os4.yaml" --gpus-per-host 8
for p in ecmp crux ideal; do
  common=(--policy "$p" --horizon-s 21600 --single-overlap --no-plots --quiet)
  for mode in pinned sprayed; do
    spray=()
    [[ $mode == sprayed ]] && spray=(--spray)
    eval_add "t1-$mode/$p" run --scenario "$sc/llm2025_multiplane8.yaml" "${common[@]}" \
        "${spray[@]}"
    eval_add "t2-$mode/$p" run --scenario "$sc/llm2025_multiplane8.yaml" \
        --trace "$(eval_trace_csv t2)" "${common[@]}" "${spray[@]}"
    eval_add "t3-os4-$mode/$p" run --scenario "$sc/llm2025_multiplane8_os4.yaml" \
        --trace "$(eval_trace_csv t3-os4)" "${common[@]}" "${spray[@]}"
  done
  eval_add "t3-os4-sprayed8/$p" run --scenario "$sc/llm2025_multiplane8_os4.yaml" \
      --trace "$(eval_trace_csv t3-os4)" "${common[@]}" --spray --spray-max-paths 8
done
rc=0
eval_go || rc=1
echo "Section 13 (commit $EVAL_COMMIT):"
eval_table --matrix "$EVAL_OUT"
echo
eval_table --runs "$EVAL_OUT"
exit $rc

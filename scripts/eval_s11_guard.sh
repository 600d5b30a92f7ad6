#!/usr/bin/env bash
# Regenerates docs/evaluation.md section 11's evaluation table (crux-pa at 4:1 and the crux-guard
# policies): oracle planning, policies crux, crux-guard, crux-pa, crux-pa-guard, ecmp, ideal, on
#   os4-6h, os2-6h      the 2k Clos at 4:1 / 2:1, one-day trace (seed 1, scatter 0.5), 6 h;
#   fig23_clos2_main    6 h;
#   llm2025_meta_os7, llm2025_hpn_os15   6 h, hybrid jobs as their single-overlap summary;
#   os4-24h, os2-24h    the 4:1 / 2:1 traces over 24 h (--no-24h leaves them out).
# The job-by-job figures of the section come from these runs' summary.json (jobs[]).
#
#   scripts/eval_s11_guard.sh [--no-24h] [common options]
# shellcheck source=scripts/eval_lib.sh
source "$(dirname "$0")/eval_lib.sh"
eval_options eval-s11 "$@"
long=1
for a in "${EVAL_ARGS[@]}"; do
  case "$a" in
    --no-24h) long=0 ;;
    *) echo "eval_s11_guard.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
policies=crux,crux-guard,crux-pa,crux-pa-guard,ecmp,ideal
common=(--oracle --no-plots --quiet)
for os in 4 2; do
  topo=configs/topologies/crux_clos2_2k_os$os.yaml
  eval_trace "os$os" --days 1 --seed 1 --scatter 0.5 --topology "$topo"
  horizons=(6h)
  ((long)) && horizons+=(24h)
  for h in "${horizons[@]}"; do
    IFS=, read -ra ps <<< "$policies"
    for p in "${ps[@]}"; do
      eval_add "os$os-$h/$p" run --topology "$topo" --trace "$(eval_trace_csv "os$os")" \
          --policy "$p" --horizon-s $((${h%h} * 3600)) "${common[@]}"
    done
  done
done
eval_add_scenarios "" "$policies" "--oracle --horizon-s 21600" \
    configs/scenarios/fig23_clos2_main.yaml
eval_add_scenarios "" "$policies" "--oracle --horizon-s 21600 --single-overlap" \
    configs/scenarios/llm2025_meta_os7.yaml configs/scenarios/llm2025_hpn_os15.yaml
rc=0
eval_go || rc=1
echo "Section 11 (commit $EVAL_COMMIT):"
eval_table --matrix "$EVAL_OUT"
echo
eval_table --loss "$EVAL_OUT" crux-pa-guard ecmp
echo
eval_table --loss "$EVAL_OUT" crux-pa ecmp
echo
eval_table --runs "$EVAL_OUT"
exit $rc

#!/usr/bin/env bash
# Runs the Fig. 23-style evaluation matrix of docs/evaluation.md: every scenario under every
# policy, one `crux-sim run` each (in parallel, -j), then one markdown table per scenario and a
# summary of the headline ratios (scripts/eval_table.py). Results land in OUT/<scenario>/<policy>/
# (summary.json, CSVs, PNGs) and OUT/<scenario>/table.md, OUT/headline.md.
#
#   scripts/eval_fig23.sh [--build DIR] [--out DIR] [--horizon-s H] [--policies a,b,...]
#                         [-j N] [--extra "crux-sim flags"] SCENARIO.yaml...
#
# Defaults: --build build/test, --out eval-out, the scenario's own horizon and policies, -j 2.
# A run that fails is reported and the others go on; the script exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/test
out=eval-out
horizon=""
policies=""
jobs=2
extra=""
scenarios=()
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --horizon-s) horizon=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    -*) echo "eval_fig23.sh: unknown option $1" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
sim="${CRUX_SIM:-$build/sim/cli/crux-sim}"
[[ -x $sim ]] || { echo "eval_fig23.sh: $sim not built" >&2; exit 2; }
((${#scenarios[@]})) || { echo "eval_fig23.sh: no scenario given" >&2; exit 2; }
mkdir -p "$out"
tasks="$out/tasks.txt"
: > "$tasks"
for sc in "${scenarios[@]}"; do
  name=$(basename "$sc" .yaml)
  if [[ -n $policies ]]; then
    list=$policies
  else
    list=$(/usr/bin/python3 -c 'import sys,re
t=open(sys.argv[1]).read()
m=re.search(r"policies:\s*\[([^\]]*)\]",t)
print(",".join(p.strip() for p in m.group(1).split(",")) if m else "crux")' "$sc")
  fi
  IFS=, read -ra ps <<< "$list"
  for p in "${ps[@]}"; do echo "$sc $name $p" >> "$tasks"; done
done
run_one() {
  local sc=$1 name=$2 p=$3
  local dir="$out/$name/$p"
  mkdir -p "$dir"
  local args=(run --scenario "$sc" --policy "$p" --out "$dir" --quiet)
  [[ -n $horizon ]] && args+=(--horizon-s "$horizon")
  # shellcheck disable=SC2206
  [[ -n $extra ]] && args+=($extra)
  local t0=$SECONDS
  if /usr/bin/time -f "%U %S %M" -o "$dir/time.txt" "$sim" "${args[@]}" > "$dir/stdout.txt" \
      2> "$dir/stderr.txt"; then
    echo "ok   $name $p ($((SECONDS - t0)) s wall)"
  else
    echo "FAIL $name $p: $(tail -1 "$dir/stderr.txt")"
    return 1
  fi
}
export -f run_one
export out horizon extra sim
rc=0
xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _ < "$tasks" || rc=1
for sc in "${scenarios[@]}"; do
  name=$(basename "$sc" .yaml)
  /usr/bin/python3 scripts/eval_table.py "$out/$name" > "$out/$name/table.md" || rc=1
done
/usr/bin/python3 scripts/eval_table.py --headline "$out" > "$out/headline.md" || rc=1
cat "$out/headline.md"
exit $rc

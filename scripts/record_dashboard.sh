#!/usr/bin/env bash
# Records a live cruxd under crux-loadgen and renders what the shipped Grafana dashboard shows
# (packaging/grafana/crux-overview.json) from the scraped /metrics with gnuplot, plus the output
# of `cruxctl impact` and `cruxctl jobs` at the end: the pictures of docs/walkthrough.md.
#
# cruxd runs on a topology (default configs/topologies/crux_clos2_2k_os4.yaml: 2,048 GPUs, 4:1
# oversubscribed, where paths matter) with its shipped defaults, insecure on loopback; crux-loadgen plays J jobs reporting every 2 s for S seconds;
# /metrics is scraped every second. Writes into OUT (default docs/img/dashboard):
#   dashboard.png       the panels: recovered / planned GPUs, re-plan latency p50/p99, event-loop
#                       lag p99, jobs by state, prediction error p50/p90, links not up
#   metrics.csv         the series behind them (t_s, one column per panel line)
#   cruxctl_impact.txt  `cruxctl impact` at the end;  cruxctl_jobs.txt  `cruxctl jobs`
#
# crux-loadgen simulates no network: the periods its jobs report are their standalone ones with
# noise, so the prediction error shown is the model's contention against none (docs/impact.md).
#
# Usage: scripts/record_dashboard.sh [--jobs J] [--seconds S] [--topology YAML] [--out DIR]
#                                    [--build-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=32
seconds=90
topology=configs/topologies/crux_clos2_2k_os4.yaml
out=docs/img/dashboard
build_dir=build/test
while (($#)); do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --topology) topology=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "record_dashboard.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
cruxd=$build_dir/daemon/cruxd
cruxctl=$build_dir/tools/cruxctl/cruxctl
loadgen=$build_dir/tools/loadgen/crux-loadgen
for b in "$cruxd" "$cruxctl" "$loadgen"; do
  [[ -x $b ]] || { echo "record_dashboard.sh: $b not built" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "gnuplot not installed (scripts/deps.sh)" >&2; exit 1; }

dir=$(mktemp -d /tmp/crux_dashboard.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
client_port=$(port)
metrics_port=$(port)
topology=$(realpath "$topology")
cat >"$dir/cruxd.yaml" <<EOF
topology: $topology
state_dir: $dir/state
client_endpoint: tcp://127.0.0.1:$client_port
metrics_listen: 127.0.0.1:$metrics_port
insecure: true
log_level: warn
EOF
"$cruxd" --config "$dir/cruxd.yaml" 2>"$dir/cruxd.log" &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$metrics_port/metrics" >/dev/null && break
  sleep 0.1
done
"$loadgen" --endpoint "tcp://127.0.0.1:$client_port" --insecure --topology "$topology" \
  --jobs "$jobs" --duration-s "$seconds" --report-interval-ms 2000 --jitter-pct 5 --quiet \
  >"$dir/loadgen.log" 2>&1 &
loadgen_pid=$!
pids+=($loadgen_pid)
mkdir -p "$dir/scrapes"
start=$(date +%s.%N)
i=0
while kill -0 "$loadgen_pid" 2>/dev/null; do
  t=$(/usr/bin/python3 -c "import time; print(f'{time.time() - $start:.2f}')")
  curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$dir/scrapes/$i.txt" && echo "$t" >"$dir/scrapes/$i.t"
  i=$((i + 1))
  if ((i == seconds - 5)); then  # Before the jobs end: what an operator would see.
    "$cruxctl" --socket "$dir/state/admin.sock" impact >"$dir/impact.txt" 2>&1 || true
    "$cruxctl" --socket "$dir/state/admin.sock" jobs >"$dir/jobs.txt" 2>&1 || true
  fi
  sleep 1
done
mkdir -p "$out"
/usr/bin/python3 - "$dir/scrapes" "$out/metrics.csv" <<'PY'
import glob, os, re, sys

scrapes, csv = sys.argv[1], sys.argv[2]
line = re.compile(r'^([a-z_:]+)(\{[^}]*\})? ([-+0-9.eEinfNa]+)$')

def parse(path):
    series = {}
    for l in open(path):
        m = line.match(l.strip())
        if m:
            series[(m.group(1), m.group(2) or '')] = float(m.group(3))
    return series

def quantile(prev, cur, family, q):
    """histogram_quantile over the increase between two scrapes (Prometheus' linear rule)."""
    buckets = []
    for (name, labels), v in cur.items():
        if name == family + '_bucket':
            le = re.search(r'le="([^"]+)"', labels).group(1)
            buckets.append((float('inf') if le == '+Inf' else float(le),
                            v - prev.get((name, labels), 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return ''
    rank, lower, below = q * buckets[-1][1], 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float('inf'):
                return lower
            return lower + (le - lower) * (rank - below) / max(c - below, 1e-12)
        lower, below = le, c
    return lower

last = {}

def held(key, v):
    """A quantile over a window without observations keeps its last value (as a panel would)."""
    if v == '':
        return last.get(key, '')
    last[key] = v
    return v

files = sorted(glob.glob(os.path.join(scrapes, '*.txt')), key=lambda p: int(os.path.basename(p)[:-4]))
rows, prev, window = [], [], 10  # Quantiles over the last 10 scrapes, as rate(...[10s]).
for f in files:
    t = float(open(f[:-4] + '.t').read())
    s = parse(f)
    base = prev[-window] if len(prev) >= window else (prev[0] if prev else {})
    get = lambda n, l='': s.get((n, l), '')
    rows.append([t, get('crux_impact_gpus_recovered'), get('crux_impact_planned_gpus'),
                 held('a', quantile(base, s, 'crux_replan_duration_seconds', 0.5)),
                 held('b', quantile(base, s, 'crux_replan_duration_seconds', 0.99)),
                 held('c', quantile(base, s, 'crux_event_loop_lag_seconds', 0.99)),
                 get('crux_jobs', '{state="registered"}'), get('crux_jobs', '{state="profiling"}'),
                 get('crux_jobs', '{state="scheduled"}'),
                 held('d', quantile(base, s, 'crux_impact_prediction_error', 0.5)),
                 held('e', quantile(base, s, 'crux_impact_prediction_error', 0.9)),
                 get('crux_links_not_up', '{health="down"}'),
                 get('crux_links_not_up', '{health="degraded"}')])
    prev.append(s)
with open(csv, 'w') as out:
    out.write('t_s,recovered_gpus,planned_gpus,replan_p50_s,replan_p99_s,loop_lag_p99_s,'
              'registered,profiling,scheduled,error_p50,error_p90,links_down,links_degraded\n')
    for r in rows:
        out.write(','.join('' if v == '' else f'{v:.6g}' for v in r) + '\n')
PY
gnuplot <<EOF
set terminal pngcairo size 1400,900 font "sans,10" noenhanced
set output "$out/dashboard.png"
set datafile separator ","
set datafile missing ""
set key top left
set grid
set multiplot layout 2,3 title "Crux overview (recorded: cruxd + crux-loadgen, $jobs jobs, $(basename "$topology" .yaml))"
set title "GPU-hours recovered per hour vs ECMP (predicted)"
plot "$out/metrics.csv" using 1:2 with lines lw 2 title "recovered", "" using 1:3 with lines title "planned GPUs"
set title "Re-plan latency (s)"
set logscale y
plot "$out/metrics.csv" using 1:4 with lines title "p50", "" using 1:5 with lines title "p99"
set title "Event-loop lag p99 (s)"
plot "$out/metrics.csv" using 1:6 with lines title "p99"
unset logscale y
set title "Jobs by state"
plot "$out/metrics.csv" using 1:7 with lines title "registered", "" using 1:8 with lines title "profiling", "" using 1:9 with lines title "scheduled"
set title "Prediction error (scheduled jobs)"
set format y "%.0f%%"
plot "$out/metrics.csv" using 1:(\$10*100) with lines title "median", "" using 1:(\$11*100) with lines title "p90"
set format y "%g"
set title "Links not up"
set xlabel "s"
plot "$out/metrics.csv" using 1:12 with lines title "down", "" using 1:13 with lines title "degraded"
unset multiplot
EOF
cp "$dir/impact.txt" "$out/cruxctl_impact.txt"
cp "$dir/jobs.txt" "$out/cruxctl_jobs.txt"
echo "wrote $out/dashboard.png, $out/metrics.csv, $out/cruxctl_impact.txt, $out/cruxctl_jobs.txt"

#!/usr/bin/env bash
# HA takeover benchmark (issue #15): a 3-member etcd cluster and N cruxd instances (`ha:`) on
# loopback, crux-loadgen with J jobs against every client endpoint, then R times: kill -9 the
# leader, time until another instance says it leads (`cruxctl status`) and until it serves every
# job with every client reconnected; check that no job is lost, no DSCP colour changed and the
# epoch grew; restart the killed instance (as systemd's Restart= would) and wait until it
# stands by. Prints one JSON line:
#   leader_ms   (list, median, max)   kill -9 -> the new leader logs "serving as leader" (client
#                                     endpoint bound, state restored): the takeover time
#   takeover_ms (list, median, max)   kill -9 -> `cruxctl status` on a standby says "leader"
#                                     (includes this script's polling: cruxctl + python per try)
#   serving_ms  (list, median, max)   kill -9 -> the new leader has all J jobs and J clients
#                                     (this script's polling, as for takeover_ms)
#   back_ms     (list, median, max)   kill -9 -> the new leader logs "takeover complete": every
#                                     job reconnected and acknowledged the new term (its own
#                                     check every 50 ms: no polling cost; issue #31 item 6's goal)
#   lost_jobs, colour_changes, epoch_not_increasing   summed over the runs (goal: all 0)
#   stale_term_refused                pushes the clients refused from a lower term (loadgen)
#   loadavg                           /proc/loadavg before and after
#
# Usage: scripts/bench_ha_takeover.sh [--runs R] [--jobs J] [--instances N] [--ttl S]
#                                     [--build-dir DIR] [--no-build] [--keep]
#   defaults: 10 runs, 1000 jobs, 3 instances, lease TTL 3 s, build/test (cruxd, cruxctl,
#   crux-loadgen built there unless --no-build). Needs etcd-server (scripts/deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10
jobs=1000
instances=3
ttl=3
build_dir=build/test
build=1
keep=0
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    --ttl) ttl=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "bench_ha_takeover.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ((build)); then
  cmake --build "$build_dir" --target cruxd cruxctl crux-loadgen -j2 >&2
fi
cruxd=$build_dir/daemon/cruxd
cruxctl=$build_dir/tools/cruxctl/cruxctl
loadgen=$build_dir/tools/loadgen/crux-loadgen
command -v etcd >/dev/null || { echo "etcd not installed (scripts/deps.sh)" >&2; exit 1; }

dir=$(mktemp -d /tmp/crux_ha_bench.XXXXXX)
pids=()
declare -A cruxd_pid
cleanup() {
  for p in "${pids[@]}" "${cruxd_pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if ((keep)); then echo "kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# etcd: 3 members, etcd's default timings (heartbeat 100 ms, election 1000 ms).
cluster="" endpoints=""
declare -a cport pport
for i in 0 1 2; do
  cport[$i]=$(free_port); pport[$i]=$(free_port)
  cluster+="${cluster:+,}m$i=http://127.0.0.1:${pport[$i]}"
  endpoints+="${endpoints:+,}http://127.0.0.1:${cport[$i]}"
done
for i in 0 1 2; do
  etcd --name "m$i" --data-dir "$dir/etcd$i" \
    --listen-client-urls "http://127.0.0.1:${cport[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${cport[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${pport[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${pport[$i]}" \
    --initial-cluster "$cluster" --initial-cluster-state new \
    --logger zap --log-level error >"$dir/etcd$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  curl -s -m 1 -X POST "http://127.0.0.1:${cport[0]}/v3/kv/put" -d '{"key":"YQ==","value":"YQ=="}' \
    | grep -q revision && break
  sleep 0.1
done

names=(a b c d e f g h)
declare -a port
client_endpoints=""
for ((i = 0; i < instances; i++)); do
  n=${names[$i]}
  port[$i]=$(free_port)
  client_endpoints+="${client_endpoints:+,}tcp://127.0.0.1:${port[$i]}"
  cat >"$dir/$n.yaml" <<YAML
insecure: true
state_dir: $dir/state_$n
client_endpoint: tcp://127.0.0.1:${port[$i]}
metrics_listen: 127.0.0.1:0
log_level: info
ha:
  etcd_endpoints: "$endpoints"
  instance: $n
  lease_ttl_s: $ttl
YAML
done
start_cruxd() {
  local n=${names[$1]}
  "$cruxd" --config "$dir/$n.yaml" >>"$dir/$n.log" 2>&1 &
  cruxd_pid[$1]=$!
}
status() { "$cruxctl" --socket "ipc://$dir/state_${names[$1]}/admin.sock" --timeout-ms 500 --json status 2>/dev/null; }
role() { status "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ha"]["role"])' 2>/dev/null || echo none; }
serving() {  # jobs == clients == J on instance $1
  status "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if d['jobs']==$jobs and d['clients']==$jobs else 1)" 2>/dev/null
}
leader() {
  for ((i = 0; i < instances; i++)); do
    [[ $(role "$i") == leader ]] && { echo "$i"; return; }
  done
  echo -1
}
snapshot() {  # job -> dscp and the epoch, as JSON
  "$cruxctl" --socket "ipc://$dir/state_${names[$1]}/admin.sock" --json jobs 2>/dev/null >"$dir/jobs.json"
  status "$1" | python3 -c "
import json,sys; s=json.load(sys.stdin); j=json.load(open('$dir/jobs.json'))
print(json.dumps({'epoch': s['epoch'], 'colours': {x['job_id']: x['dscp'] for x in j['jobs']}}))"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((i = 0; i < instances; i++)); do start_cruxd "$i"; sleep 0.3; done
"$loadgen" --insecure --endpoint "$client_endpoints" --topology configs/topologies/example_clos2.yaml \
  --jobs "$jobs" --duration-s 0 --report-interval-ms 5000 --timeout-ms 2000 --json --quiet \
  >"$dir/loadgen.json" 2>"$dir/loadgen.err" &
loadgen_pid=$!
pids+=($loadgen_pid)
l=-1
for _ in $(seq 600); do l=$(leader); ((l >= 0)) && serving "$l" && break; sleep 0.2; done
((l >= 0)) || { echo "no leader serving $jobs jobs" >&2; exit 1; }

leaders=() takeovers=() servings=() backs=() lost=0 recoloured=0 not_increasing=0
for ((r = 0; r < runs; r++)); do
  l=$(leader)
  before=$(snapshot "$l")
  declare -A log_lines=()
  for ((i = 0; i < instances; i++)); do log_lines[$i]=$(wc -l <"$dir/${names[$i]}.log"); done
  t0=$(now_ms)
  kill -9 "${cruxd_pid[$l]}"
  wait "${cruxd_pid[$l]}" 2>/dev/null || true
  n=-1
  while ((n < 0)); do
    for ((i = 0; i < instances; i++)); do
      ((i == l)) && continue
      [[ $(role "$i") == leader ]] && { n=$i; break; }
    done
    (($(now_ms) - t0 > 60000)) && { echo "run $r: no takeover in 60 s" >&2; exit 1; }
    ((n < 0)) && sleep 0.05
  done
  t1=$(now_ms)
  until serving "$n"; do
    (($(now_ms) - t0 > 120000)) && { echo "run $r: jobs not back in 120 s" >&2; exit 1; }
    sleep 0.1
  done
  t2=$(now_ms)
  after=$(snapshot "$n")
  read -r dl dc de < <(python3 -c "
import json; b=json.loads('''$before'''); a=json.loads('''$after''')
lost=sum(1 for k in b['colours'] if k not in a['colours'])
changed=sum(1 for k,v in b['colours'].items() if k in a['colours'] and a['colours'][k]!=v)
print(lost, changed, 0 if a['epoch']>b['epoch'] else 1)")
  lost=$((lost + dl)) recoloured=$((recoloured + dc)) not_increasing=$((not_increasing + de))
  # The new leader's own log since the kill: when it was serving and when every job was back
  # (wall clock, like t0).
  log_ms() {  # the time of the last line matching $1 in the new leader's log since the kill
    tail -n +$((log_lines[$n] + 1)) "$dir/${names[$n]}.log" | grep "$1" | tail -1 | python3 -c "
import sys, datetime
line = sys.stdin.read().strip()
t = datetime.datetime.strptime(line[:23], '%Y-%m-%d %H:%M:%S.%f')
print(int(t.replace(tzinfo=datetime.datetime.now().astimezone().tzinfo).timestamp() * 1000))"
  }
  until tail -n +$((log_lines[$n] + 1)) "$dir/${names[$n]}.log" | grep -q "ha: takeover complete"; do
    (($(now_ms) - t0 > 180000)) && { echo "run $r: no 'takeover complete' in 180 s" >&2; exit 1; }
    sleep 0.1
  done
  serving_at=$(log_ms "ha: ${names[$n]} serving as leader")
  back_at=$(log_ms "ha: takeover complete")
  leaders+=($((serving_at - t0))) takeovers+=($((t1 - t0))) servings+=($((t2 - t0)))
  backs+=($((back_at - t0)))
  echo "run $r: ${names[$l]} killed, ${names[$n]} serving as leader after $((serving_at - t0)) ms (cruxctl saw it after $((t1 - t0)) ms), every job back and acknowledged after $((back_at - t0)) ms, serves all (cruxctl) after $((t2 - t0)) ms (lost $dl, recoloured $dc)" >&2
  start_cruxd "$l"  # As systemd would; it stands by.
  until [[ $(role "$l") == standby ]]; do sleep 0.1; done
  sleep 1
done
kill -INT "$loadgen_pid"; wait "$loadgen_pid" 2>/dev/null || true
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$dir/loadgen.json" <<PY
import json, statistics, sys
t=[$(IFS=,; echo "${takeovers[*]}")]; s=[$(IFS=,; echo "${servings[*]}")]
ld=[$(IFS=,; echo "${leaders[*]}")]; bk=[$(IFS=,; echo "${backs[*]}")]
try:
    lg=json.load(open(sys.argv[1]))
except Exception:
    lg={}
print(json.dumps({"runs": $runs, "jobs": $jobs, "instances": $instances, "lease_ttl_s": $ttl,
  "leader_ms": ld, "leader_median_ms": statistics.median(ld), "leader_max_ms": max(ld),
  "takeover_ms": t, "takeover_median_ms": statistics.median(t), "takeover_max_ms": max(t),
  "serving_ms": s, "serving_median_ms": statistics.median(s), "serving_max_ms": max(s),
  "back_ms": bk, "back_median_ms": statistics.median(bk), "back_max_ms": max(bk),
  "lost_jobs": $lost, "colour_changes": $recoloured, "epoch_not_increasing": $not_increasing,
  "stale_term_refused": lg.get("stale_term_refused"), "loadgen_registered": lg.get("registered"),
  "loadavg_before": "$load_before", "loadavg_after": "$load_after"}))
PY

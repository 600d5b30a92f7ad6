#!/usr/bin/env bash
# Daemon benchmark: one cruxd and crux-loadgen --benchmark with N simulated job clients (default
# 10,000) on loopback. Prints one JSON line with
#   ingestion_rate_per_s   profile reports acknowledged per second (goal >= 50,000)
#   push_p50_ms, push_p99_ms  Assignment latency from the daemon's send stamp to client receipt
#                             (goal p99 < 10 ms)
#   push_frames, ack_frames   frames that carried the pushes / their acks (an AssignmentBatch or
#                             AckBatch counts once; push_samples counts assignments)
#   send_queue_p50_le_ms, send_queue_p99_le_ms, send_queue_frames  cruxd's part of that: how long
#                             replies and pushes waited in its send queue before ZeroMQ took
#                             them (crux_transport_send_queue_seconds, client endpoint; the upper
#                             bound of the histogram bucket the quantile falls in)
#   daemon_vmhwm_mb        cruxd's peak resident set, /proc/PID/status VmHWM (goal < 200 MB)
#   last_replan_ms, replans   from `cruxctl --json status` after the run
#   loop_lag_p99_ms, loop_lag_max_ms  cruxd's event-loop lag over the last minute (the run)
#   daemon_thread_cpu_s       the same per thread name (crux-worker = planning, crux-server =
#                             transport, ZMQbg/IO/0 = libzmq, cruxd = the event loop)
#   daemon_cpu_s, daemon_cpu_us_per_msg  cruxd's CPU time (all threads, /proc/PID/stat) during
#                             the load run, and per client message it handled (registrations,
#                             reports, heartbeats, acks; re-plans included): 1e6 / that is the
#                             rate one core could sustain, whatever the load generator manages on
#                             a shared machine
# plus the raw loadgen summary under "loadgen". Quiet reports (docs/protocol.md "Quiet requests"):
# --loadgen-args "--ack-every 8" asks for an Ack on every 8th report only.
#
# With --hostd N the load generator plays N crux-hostd agents instead (crux-loadgen --hostd: one
# connection per host of the first N, each carrying the parts of the jobs placed on its host;
# docs/daemon.md "Load"): the same JSON, where "clients" counts the parts, plus "agents", "jobs",
# "mode": "hostd" and the arrivals' trigger-to-push latency (arrival_p50_ms, arrival_max_ms,
# arrival_samples: --arrivals jobs held back and registered during the run). In this mode cruxd
# runs with its default 15 s lease (crux-hostd's heartbeat every 5 s), reports follow crux-hostd's
# rate (crux-loadgen's default for --hostd: one per part at registration and then every 60 s)
# and the run lasts 60 s unless --duration-s says otherwise.
#
# Usage: scripts/bench_daemon.sh [--jobs N] [--duration-s S] [--topology FILE]
#                                [--build-dir DIR] [--no-build] [--keep]
#                                [--hostd N] [--arrivals K] [--arrival-interval-ms MS]
#                                [--cruxd-yaml TEXT] [--side-arrivals K [--side-delay-s S]]
#   --topology   topology YAML used by both cruxd and the load generator
#                (default configs/topologies/example_clos2.yaml, the daemon's embedded one)
#   --build-dir  where cruxd, cruxctl and crux-loadgen are (default build/release, built with the
#                release preset unless --no-build)
#   --keep       keep the temporary state directory and logs (printed at the end)
#   --cruxd-preload LIB  start cruxd (only cruxd) with LD_PRELOAD=LIB, e.g. to compare allocators
#   --loadgen-args A     extra crux-loadgen arguments (word-split), e.g. "--report-interval-ms 100"
#                        to measure push latency at a given load instead of at saturation
#   --log-level L        cruxd's log_level (default warn; info shows re-plan and commit timings)
#   --cruxd-wrap CMD     start cruxd under CMD (word-split), e.g. "heaptrack -o /tmp/cruxd.hp"
#   --hostd N            N crux-hostd agents carrying the jobs' parts (see above)
#   --arrivals K         jobs held back and registered one by one during the run; their
#                        trigger-to-push latency is in the JSON (default 3 with --hostd, else 0;
#                        direct mode at saturation measures queueing, so pair it with
#                        --loadgen-args "--report-interval-ms MS")
#   --arrival-interval-ms MS  from the end of registration to the first arrival and between
#                        arrivals (default 15000)
#   --side-arrivals K    a second crux-loadgen (one process, jobs "side-*", seed 2, a report
#                        every 5 s) starts --side-delay-s after the main one (default 30) and
#                        registers K jobs one by one, every --arrival-interval-ms, while the
#                        main load runs: their trigger-to-push latency is side_arrival_* in the
#                        JSON. For direct mode at 10,000 jobs, which needs several load
#                        generator processes (open-file limit), where --arrivals cannot run.
#   --cruxd-yaml TEXT    extra lines for cruxd's config (YAML), e.g.
#                        "reoptimize_interval_ms: 20000" or $'impact:\n  enabled: false'
# Exit status: 0 when the run completed (whether or not the goals were met), non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=10000
duration_s=""
hostd=0
arrivals=""
arrival_interval_ms=15000
cruxd_yaml=""
side_arrivals=0
side_delay_s=30
topology=configs/topologies/example_clos2.yaml
build_dir=build/release
build=1
keep=0
cruxd_preload=""
cruxd_wrap=""
log_level=warn
loadgen_args=""
while (($#)); do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --duration-s) duration_s=$2; shift 2 ;;
    --topology) topology=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --keep) keep=1; shift ;;
    --cruxd-preload) cruxd_preload=$2; shift 2 ;;
    --cruxd-wrap) cruxd_wrap=$2; shift 2 ;;
    --log-level) log_level=$2; shift 2 ;;
    --loadgen-args) loadgen_args=$2; shift 2 ;;
    --hostd) hostd=$2; shift 2 ;;
    --arrivals) arrivals=$2; shift 2 ;;
    --arrival-interval-ms) arrival_interval_ms=$2; shift 2 ;;
    --cruxd-yaml) cruxd_yaml=$2; shift 2 ;;
    --side-arrivals) side_arrivals=$2; shift 2 ;;
    --side-delay-s) side_delay_s=$2; shift 2 ;;
    -h|--help) sed -n '2,57p' "$0"; exit 0 ;;
    *) echo "bench_daemon.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

[[ $hostd =~ ^[0-9]+$ ]] || { echo "bench_daemon.sh: --hostd: must be a number" >&2; exit 2; }
if ((hostd > 0)); then
  duration_s=${duration_s:-60}
  lease_ms=15000  # cruxd's default: crux-hostd asks for none, and heartbeats every lease / 3.
  mode_args="--hostd $hostd --arrivals ${arrivals:-3} --arrival-interval-ms $arrival_interval_ms"
else
  duration_s=${duration_s:-20}
  lease_ms=600000
  mode_args="--benchmark"
  if [[ -n $arrivals && $arrivals != 0 ]]; then
    mode_args+=" --arrivals $arrivals --arrival-interval-ms $arrival_interval_ms"
  fi
fi

if ((build)); then
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target cruxd cruxctl crux-loadgen >&2
fi
cruxd=$build_dir/daemon/cruxd
cruxctl=$build_dir/tools/cruxctl/cruxctl
loadgen=$build_dir/tools/loadgen/crux-loadgen
for exe in "$cruxd" "$cruxctl" "$loadgen"; do
  [[ -x $exe ]] || { echo "bench_daemon.sh: $exe not found (build first)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/crux_bench.XXXXXX")
cruxd_pid=""
cleanup() {
  if [[ -n $cruxd_pid ]] && kill -0 "$cruxd_pid" 2>/dev/null; then
    kill -TERM "$cruxd_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$cruxd_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$cruxd_pid" 2>/dev/null || true
  fi
  if [[ -n ${wrapper_pid:-} ]]; then wait "$wrapper_pid" 2>/dev/null || true; fi
  if ((keep)); then echo "bench_daemon.sh: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# A free loopback port (bind to 0 and read it back).
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
metrics_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
endpoint=tcp://127.0.0.1:$port
socket=$work/state/admin.sock
topology_abs=$(readlink -f "$topology")
cat >"$work/cruxd.yaml" <<EOF
topology: $topology_abs
state_dir: $work/state
client_endpoint: $endpoint
insecure: true
metrics_listen: "127.0.0.1:$metrics_port"
lease_ms: $lease_ms
log_level: $log_level
EOF
if [[ -n $cruxd_yaml ]]; then printf '%s\n' "$cruxd_yaml" >>"$work/cruxd.yaml"; fi

# 10k DEALER peers: one descriptor each in the daemon.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# shellcheck disable=SC2086  # --cruxd-wrap is word-split on purpose.
env ${cruxd_preload:+LD_PRELOAD="$cruxd_preload"} $cruxd_wrap "$cruxd" --config "$work/cruxd.yaml" \
  >"$work/cruxd.out" 2>"$work/cruxd.err" &
cruxd_pid=$!
if [[ -n $cruxd_wrap ]]; then
  # The wrapper's child is the cruxd to measure.
  for _ in $(seq 100); do
    child=$(pgrep -n -x cruxd || true)
    [[ -n $child && $child != "$cruxd_pid" ]] && break
    sleep 0.1
  done
  wrapper_pid=$cruxd_pid
  cruxd_pid=${child:-$cruxd_pid}
fi
for _ in $(seq 300); do
  if "$cruxctl" --socket "$socket" --timeout-ms 500 status >/dev/null 2>&1; then break; fi
  kill -0 "$cruxd_pid" 2>/dev/null || { echo "bench_daemon.sh: cruxd exited:" >&2; cat "$work/cruxd.err" >&2; exit 1; }
  sleep 0.1
done
"$cruxctl" --socket "$socket" --timeout-ms 2000 status >/dev/null

if ((hostd > 0)); then
  echo "bench_daemon.sh: cruxd pid $cruxd_pid on $endpoint; $jobs jobs on $hostd agents for ${duration_s}s ..." >&2
else
  echo "bench_daemon.sh: cruxd pid $cruxd_pid on $endpoint; $jobs clients for ${duration_s}s ..." >&2
fi
cpu_ticks() { awk '{print $14 + $15}' "/proc/$cruxd_pid/stat"; }
ticks_before=$(cpu_ticks)
# Per-thread CPU ticks by thread name (crux-worker, crux-server, ZMQbg/IO/0, the loop "cruxd").
thread_ticks() {
  for t in /proc/"$cruxd_pid"/task/*; do
    # comm may contain spaces or slashes: take it from between the parentheses.
    sed -E 's/^[0-9]+ \((.*)\) [A-Za-z] (.*)$/\1\t\2/' "$t/stat" 2>/dev/null |
      awk -F'\t' '{split($2, f, " "); print $1 "\t" f[11] + f[12]}'
  done
}
thread_ticks >"$work/threads_before.tsv"
side_pid=""
echo '{}' >"$work/side.json"
if ((side_arrivals > 0)); then
  side_duration_s=$(awk -v d="$duration_s" -v w="$side_delay_s" 'BEGIN {print (d > w ? d - w : 1)}')
  (
    sleep "$side_delay_s"
    exec "$loadgen" --endpoint "$endpoint" --insecure --topology "$topology_abs" \
      --jobs $((side_arrivals + 1)) --arrivals "$side_arrivals" \
      --arrival-interval-ms "$arrival_interval_ms" --job-prefix side- --workers 1 \
      --report-interval-ms 5000 --duration-s "$side_duration_s" --json --quiet --seed 2
  ) >"$work/side.json" 2>"$work/side.err" &
  side_pid=$!
fi
"$loadgen" --endpoint "$endpoint" --insecure --topology "$topology_abs" --jobs "$jobs" \
  --duration-s "$duration_s" $mode_args --json --quiet --seed 1 $loadgen_args >"$work/loadgen.json" \
  2>"$work/loadgen.err" || { echo "bench_daemon.sh: crux-loadgen failed:" >&2; cat "$work/loadgen.err" >&2; exit 1; }

if [[ -n $side_pid ]]; then
  wait "$side_pid" || { echo "bench_daemon.sh: side crux-loadgen failed:" >&2; cat "$work/side.err" >&2; }
fi
vmhwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$cruxd_pid/status")
thread_ticks >"$work/threads_after.tsv"
cpu_s=$(( $(cpu_ticks) - ticks_before ))
cpu_s=$(awk -v t="$cpu_s" -v hz="$(getconf CLK_TCK)" 'BEGIN {print t / hz}')
# The loop may still be busy with the last re-plan's results: retry for up to a minute.
echo '{}' >"$work/status.json"
for _ in 1 2 3 4 5 6; do
  if "$cruxctl" --socket "$socket" --timeout-ms 10000 --json status >"$work/status.tmp" 2>/dev/null; then
    mv "$work/status.tmp" "$work/status.json"
    break
  fi
done

# cruxd's own metrics (the send-queue histogram); empty when they cannot be read.
/usr/bin/python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:" + sys.argv[1] + "/metrics", timeout=10).read().decode())' \
  "$metrics_port" >"$work/metrics.txt" 2>/dev/null || : >"$work/metrics.txt"

/usr/bin/python3 - "$work/loadgen.json" "$work/status.json" "$vmhwm_kb" "$jobs" "$cpu_s" \
  "$work/threads_before.tsv" "$work/threads_after.tsv" "$(getconf CLK_TCK)" \
  "$work/metrics.txt" <<'EOF'
import json, os, sys
def thread_cpu(before_path, after_path, hz):
    def read(path):
        out = {}
        for line in open(path):
            name, _, ticks = line.rstrip("\n").rpartition("\t")
            if name:
                out[name] = out.get(name, 0) + int(ticks)
        return out
    before, after = read(before_path), read(after_path)
    return {k: round((v - before.get(k, 0)) / hz, 2) for k, v in sorted(after.items())}
lg = json.load(open(sys.argv[1]))
st = json.load(open(sys.argv[2]))
vmhwm_mb = int(sys.argv[3]) / 1024.0
push = lg.get("push_latency", {})
msgs = (lg.get("reports_acked", 0) + lg.get("registered", 0) + lg.get("heartbeats_acked", 0)
        + lg.get("acks_sent", 0))
hostd = lg.get("agents", 0) > 0
arrival = lg.get("arrival_trigger_to_push", {})
out = {
    "clients": lg.get("jobs") if hostd else int(sys.argv[4]),
    "registered": lg.get("registered"),
    "ingestion_rate_per_s": round(lg.get("report_rate_per_s", 0.0), 1),
    "push_p50_ms": push.get("p50_ms"),
    "push_p99_ms": push.get("p99_ms"),
    "push_samples": push.get("samples"),
    "push_frames": lg.get("push_frames"),
    "ack_frames": lg.get("ack_frames"),
    "daemon_vmhwm_mb": round(vmhwm_mb, 1),
    "daemon_cpu_s": float(sys.argv[5]),
    "daemon_cpu_us_per_msg": round(float(sys.argv[5]) * 1e6 / max(1, msgs), 2),
    # CPU seconds per thread name during the load run (threads of one name summed).
    "daemon_thread_cpu_s": thread_cpu(sys.argv[6], sys.argv[7], float(sys.argv[8])),
    "last_replan_ms": st.get("last_replan_ms"),
    "replans": st.get("replans"),
    # Event-loop lag (post to run) over the last minute, i.e. the load run (goal p99 <= 20 ms).
    "loop_lag_p99_ms": st.get("loop_lag_p99_ms"),
    "loop_lag_max_ms": st.get("loop_lag_max_ms"),
    "epoch": st.get("epoch"),
    "goals": {
        "ingestion_rate_ge_50k": lg.get("report_rate_per_s", 0.0) >= 50000,
        # No samples (the daemon did not stamp Assignment.sent_unix_ns) is not a pass.
        "push_p99_lt_10ms": (push.get("samples") or 0) > 0 and push.get("p99_ms", 1e9) < 10,
        "rss_lt_200mb": vmhwm_mb < 200,
    },
    "loadgen": lg,
}
if hostd:
    # Host-agent mode: the clients are the jobs' parts, spoken for by the agents.
    out["mode"] = "hostd"
    out["agents"] = lg.get("agents")
    out["jobs"] = lg.get("hostd_jobs")
if lg.get("arrivals"):
    out["arrival_samples"] = arrival.get("samples")
    out["arrival_p50_ms"] = arrival.get("p50_ms")
    out["arrival_max_ms"] = arrival.get("max_ms")
    out["goals"]["arrival_trigger_to_push_le_1s"] = (
        (arrival.get("samples") or 0) > 0 and arrival.get("max_ms", 1e9) <= 1000)
# cruxd's send queue (crux_transport_send_queue_seconds, client endpoint): the wait from
# queuing a reply or push to handing it to ZeroMQ, over cruxd's life; quantiles are the upper
# bound of the bucket they fall in (an upper bound on the wait).
buckets = {}
for line in open(sys.argv[9]):
    if line.startswith('crux_transport_send_queue_seconds_bucket{endpoint="client"'):
        le = line.split('le="')[1].split('"')[0]
        buckets[float("inf") if le == "+Inf" else float(le)] = float(line.split()[-1])
if buckets and max(buckets.values()) > 0:
    total = max(buckets.values())
    def quantile_le_ms(q):
        for le in sorted(buckets):
            if buckets[le] >= q * total:
                return None if le == float("inf") else le * 1000
    out["send_queue_frames"] = int(total)
    out["send_queue_p50_le_ms"] = quantile_le_ms(0.5)
    out["send_queue_p99_le_ms"] = quantile_le_ms(0.99)
side_path = os.path.join(os.path.dirname(sys.argv[1]), "side.json")
try:
    side = json.load(open(side_path)).get("arrival_trigger_to_push", {})
except (OSError, ValueError):
    side = {}
if side:
    out["side_arrival_samples"] = side.get("samples")
    out["side_arrival_p50_ms"] = side.get("p50_ms")
    out["side_arrival_max_ms"] = side.get("max_ms")
    out["goals"]["side_arrival_trigger_to_push_le_1s"] = (
        (side.get("samples") or 0) > 0 and side.get("max_ms", 1e9) <= 1000)
print(json.dumps(out))
EOF

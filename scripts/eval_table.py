#!/usr/bin/python3
"""Tables of the Fig. 23-style evaluation (scripts/eval_fig23.sh; docs/evaluation.md).

  eval_table.py DIR             one scenario: DIR/<policy>/summary.json -> markdown table
  eval_table.py --headline OUT  every OUT/<scenario>/: crux vs each policy, both metrics
  eval_table.py --priorities OUT
                                every OUT/<scenario>/: what the priority half adds (crux vs
                                crux-ps, crux-pa vs ecmp) beside the other policies
  eval_table.py --plots DIR PNG_PREFIX
                                gnuplot PNGs of one scenario: PNG_PREFIX-utilization.png (GPU
                                utilisation over time, one curve per policy) and
                                PNG_PREFIX-slowdown-cdf.png (per-job slowdown CDF)

Both utilisations of summary.json are shown (docs/sim-workloads.md, "Two utilisations"):
gpu = GPU busy time / allocated GPU time (the paper's metric), work = FLOPs done / FLOPs the
jobs' GPUs could have done (what Crux maximises). Slowdowns are per job: mean iteration /
standalone iteration.
"""
import json
import os
import sys

# Baselines (the paper's comparison set); crux-ps-pa and crux-pa are ablations of Crux itself.
BASELINES = ["ecmp", "sincronia", "taccl", "cassini"]
ORDER = ["crux", "crux-ps", "crux-ps-pa", "crux-pa", "ecmp", "sincronia", "taccl", "cassini", "ideal"]


def load(d):
    runs = {}
    for p in sorted(os.listdir(d)):
        f = os.path.join(d, p, "summary.json")
        if not os.path.isfile(f):
            continue
        with open(f) as fh:
            s = json.load(fh)
        cpu = None
        t = os.path.join(d, p, "time.txt")
        if os.path.isfile(t):
            parts = open(t).read().split()
            try:
                cpu = float(parts[-3]) + float(parts[-2])
            except (ValueError, IndexError):
                cpu = None
        s["_cpu_s"] = cpu
        runs[p] = s
    return dict(sorted(runs.items(), key=lambda kv: (ORDER.index(kv[0]) if kv[0] in ORDER
                                                       else len(ORDER), kv[0])))


def pct(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(round(q * len(xs) + 0.5)) - 1))
    return xs[k]


def slowdowns(s):
    return [j["slowdown"] for j in s.get("jobs", []) if j.get("slowdown") is not None]


def table(d):
    runs = load(d)
    if not runs:
        return f"(no runs in {d})\n"
    ideal = runs.get("ideal")
    crux = runs.get("crux")
    any_s = next(iter(runs.values()))
    lines = [f"Scenario `{os.path.basename(os.path.normpath(d))}`: {len(any_s.get('jobs', []))} "
             f"jobs, horizon {any_s.get('horizon_s', 0) / 3600:.1f} h, "
             f"control {any_s.get('control', {}).get('mode', '?')}.", "",
             "| policy | GPU util | work util | GPU vs ideal | work vs ideal | crux / it (GPU) "
             "| crux / it (work) | mean slowdown | p99 slowdown | jobs slowed > 1% | events "
             "| CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p, s in runs.items():
        g, w = s["gpu_utilization"], s.get("work_utilization", float("nan"))
        sl = slowdowns(s)
        def ratio(a, b):
            return f"{a / b:.3f}" if b else "-"
        cpu = f"{s['_cpu_s']:.0f}" if s["_cpu_s"] is not None else "-"
        lines.append(
            f"| {p} | {g:.4f} | {w:.4f} | "
            f"{ratio(g, ideal['gpu_utilization']) if ideal else '-'} | "
            f"{ratio(w, ideal['work_utilization']) if ideal else '-'} | "
            f"{ratio(crux['gpu_utilization'], g) if crux else '-'} | "
            f"{ratio(crux['work_utilization'], w) if crux else '-'} | "
            f"{(sum(sl) / len(sl)) if sl else 0:.4f} | {pct(sl, 0.99):.3f} | "
            f"{sum(1 for x in sl if x > 1.01)} | {s.get('events', 0):,} | {cpu} |")
    return "\n".join(lines) + "\n"


def scenarios(out):
    """(name, runs) of every OUT/<scenario>/ that has a crux run, by name."""
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if os.path.isdir(d):
            runs = load(d)
            if "crux" in runs:
                yield name, runs


def best_baseline(runs):
    """The baseline run with the highest GPU utilisation, or None."""
    base = {p: r for p, r in runs.items() if p in BASELINES}
    return max(base, key=lambda p: base[p]["gpu_utilization"]) if base else None


def headline(out):
    rows = ["| scenario | crux GPU util | crux work util | crux / ideal (GPU, work) | "
            "best baseline (GPU) | crux / best baseline (GPU, work) | crux / ecmp (GPU, work) "
            "| crux / sincronia (GPU, work) | crux / cassini (GPU, work) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, runs in scenarios(out):
        c = runs["crux"]

        def pair(p):
            if p not in runs:
                return "-"
            r = runs[p]
            w = r.get("work_utilization", 0)
            return (f"{c['gpu_utilization'] / r['gpu_utilization']:.3f}, "
                    f"{c['work_utilization'] / w:.3f}" if r["gpu_utilization"] and w else "-")
        best = best_baseline(runs)
        rows.append(f"| {name} | {c['gpu_utilization']:.4f} | {c['work_utilization']:.4f} | "
                    f"{pair('ideal')} | {best or '-'} | {pair(best) if best else '-'} | "
                    f"{pair('ecmp')} | {pair('sincronia')} | {pair('cassini')} |")
    return "\n".join(rows) + "\n"


PRIORITY_POLICIES = ["crux", "crux-ps", "crux-ps-pa", "crux-guard", "crux-pa", "ecmp", "sincronia",
                     "taccl", "ideal"]


def priorities(out):
    """One row per OUT/<scenario>/: GPU utilisation of each policy (work utilisation after a
    slash where it differs by more than 0.0005), then the priorities' contribution in points of
    GPU utilisation: crux - crux-ps (Crux's paths, with and without its levels) and crux-pa -
    ecmp (ECMP paths, with and without them), crux - the best baseline, and the CPU seconds of
    all the scenario's runs (user + system, /usr/bin/time)."""
    head = ["scenario"] + PRIORITY_POLICIES + [
        "crux - crux-ps (pts)", "crux-pa - ecmp (pts)", "crux - best baseline (pts)", "CPU s"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, runs in scenarios(out):
        def cell(p):
            if p not in runs:
                return "-"
            g = runs[p]["gpu_utilization"]
            w = runs[p].get("work_utilization", g)
            return f"{g:.4f}" if abs(g - w) <= 0.0005 else f"{g:.4f} / {w:.4f}"

        def diff(a, b):
            if a not in runs or b not in runs:
                return "-"
            return f"{100 * (runs[a]['gpu_utilization'] - runs[b]['gpu_utilization']):+.2f}"
        best = best_baseline(runs)
        cpu = sum(r["_cpu_s"] or 0 for r in runs.values())
        rows.append("| " + " | ".join(
            [name] + [cell(p) for p in PRIORITY_POLICIES] +
            [diff("crux", "crux-ps"), diff("crux-pa", "ecmp"),
             (diff("crux", best) + f" ({best})") if best else "-", f"{cpu:.0f}"]) + " |")
    return "\n".join(rows) + "\n"


def plots(d, prefix):
    import subprocess
    runs = load(d)
    name = os.path.basename(os.path.normpath(d))
    gp = ["set terminal pngcairo size 900,480 noenhanced", "set datafile separator ','",
          "set key outside right", "set grid"]
    util = []
    cdf = []
    floor = 1.0  # Most jobs are single-host (slowdown 1): zoom on the CDF's upper part.
    for i, p in enumerate(runs):
        ts = os.path.join(d, p, "timeseries.csv")
        sl = os.path.join(d, p, "slowdown.csv")
        if os.path.isfile(ts):
            util.append(f"'{ts}' skip 1 using ($1/3600):2 with lines lw 2 dt {i % 5 + 1} "
                        f"title '{p}'")
        if os.path.isfile(sl):
            vals = [float(r.split(",")[2]) for r in open(sl).read().splitlines()[1:] if r]
            n = max(1, len(vals))
            floor = min(floor, 1 - sum(1 for v in vals if v > 1.0005) / n)
            cdf.append(f"'{sl}' skip 1 using 3:(1-($1-1)/{n}.0) with steps lw 2 dt {i % 5 + 1} "
                       f"title '{p}'")
    gp += [f"set output '{prefix}-utilization.png'",
           f"set title '{name}: GPU utilisation of running jobs over time'",
           "set xlabel 'simulated time (h)'", "set ylabel 'GPU utilisation'",
           "set yrange [0:1.05]", "plot " + ", ".join(util or ["[0:1] NaN title 'no data'"]),
           f"set output '{prefix}-slowdown-cdf.png'",
           f"set title '{name}: per-job slowdown (mean / standalone iteration)'",
           "set xlabel 'slowdown'", "set ylabel 'fraction of jobs with slowdown <= x'",
           f"set yrange [{max(0.0, floor - 0.02):.3f}:1.002]", "set logscale x",
           "plot " + ", ".join(cdf or ["[1:2] NaN title 'no data'"]), "unset output"]
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True, check=True)


def main(argv):
    if len(argv) == 4 and argv[1] == "--plots":
        plots(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "--headline":
        sys.stdout.write(headline(argv[2]))
    elif len(argv) == 3 and argv[1] == "--priorities":
        sys.stdout.write(priorities(argv[2]))
    elif len(argv) == 2:
        sys.stdout.write(table(argv[1]))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

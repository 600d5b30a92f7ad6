#!/usr/bin/python3
"""Tables of the Fig. 23-style evaluation (scripts/eval_fig23.sh; docs/evaluation.md).

  eval_table.py DIR             one scenario: DIR/<policy>/summary.json -> markdown table
  eval_table.py --headline OUT  every OUT/<scenario>/: crux vs each policy, both metrics
  eval_table.py --priorities OUT
                                every OUT/<scenario>/: what the priority half adds (crux vs
                                crux-ps, crux-pa vs ecmp) beside the other policies
  eval_table.py --runs DIR       every run under DIR (any depth): one row each, with its CPU
                                seconds, peak RSS and commit (scripts/eval_lib.sh runs)
  eval_table.py --matrix DIR     rows DIR/<row>/, columns the policies DIR/<row>/<policy>/: GPU
                                utilisation (/ work where it differs), crux / best baseline and
                                crux / each ECMP-path baseline run (GPU), the row's CPU seconds
                                and commit
  eval_table.py --fidelity SUMMARY PHASES
                                every scenario in both SUMMARY/<scenario>/ (hybrid jobs as
                                their single-overlap summary) and PHASES/<scenario>/ (at phase
                                level): per policy, GPU and work utilisation under each job
                                model and crux / policy under each, with phases / summary of
                                that ratio (GPU); then the CPU seconds of each run
  eval_table.py --traces DIR     the gen-trace reports DIR/*.json: jobs, load and the shares of
                                jobs and GPUs that may contend
  eval_table.py --loss DIR A B   rows DIR/<row>/: the GPU-seconds of computation policy A loses
                                and gains against policy B, job by job ((busy under B - busy
                                under A) x GPUs), and each one's mean slowdown
  eval_table.py --plots DIR PNG_PREFIX
                                gnuplot PNGs of one scenario: PNG_PREFIX-utilization.png (GPU
                                utilisation over time, one curve per policy) and
                                PNG_PREFIX-slowdown-cdf.png (per-job slowdown CDF)

Both utilisations of summary.json are shown (docs/sim-workloads.md, "Two utilisations"):
gpu = GPU busy time / allocated GPU time (the paper's metric), work = FLOPs done / FLOPs the
jobs' GPUs could have done (what Crux maximises). Slowdowns are per job: mean iteration /
standalone iteration.

CPU seconds are user + system time from the run's time.txt, written by /usr/bin/time in any of
GNU time's formats (the default one, -v, -p, or -f "%U %S %M" as older scripts wrote); the commit
comes from the run's run.json (scripts/eval_lib.sh), "-" for runs made without it.
"""
import json
import os
import re
import sys

# Baselines (the paper's comparison set); crux-ps-pa and crux-pa are ablations of Crux itself.
BASELINES = ["ecmp", "sincronia", "taccl", "cassini"]
ORDER = ["crux", "crux-guard", "crux-ps", "crux-ps-pa", "crux-pa", "crux-pa-guard", "ecmp",
         "sincronia", "taccl", "cassini", "ideal"]


def parse_time(text):
    """(cpu_s, max_rss_kb) from a /usr/bin/time report, either None where absent. Understands GNU
    time's default format ("1.23user 0.04system 0:01.30elapsed ... 5120maxresident)k"), its -v
    and -p (POSIX) formats and the bare "%U %S %M" of -f. A "Command exited with non-zero
    status" line may come first."""
    m = re.search(r"([0-9.]+)user\s+([0-9.]+)system", text)
    if m:
        r = re.search(r"(\d+)maxresident", text)
        return float(m.group(1)) + float(m.group(2)), int(r.group(1)) if r else None
    m = re.search(r"User time \(seconds\):\s*([0-9.]+)", text)
    if m:
        s = re.search(r"System time \(seconds\):\s*([0-9.]+)", text)
        r = re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", text)
        return (float(m.group(1)) + (float(s.group(1)) if s else 0.0),
                int(r.group(1)) if r else None)
    m = re.search(r"^user\s+([0-9.]+)\s*$", text, re.M)
    if m:
        s = re.search(r"^sys\s+([0-9.]+)\s*$", text, re.M)
        return float(m.group(1)) + (float(s.group(1)) if s else 0.0), None
    for line in reversed(text.strip().splitlines()):
        parts = line.split()
        if len(parts) == 3:
            try:
                return float(parts[0]) + float(parts[1]), int(float(parts[2]))
            except ValueError:
                pass
    return None, None


def load_run(d):
    """summary.json of run directory d with _cpu_s, _rss_kb and _commit added, or None."""
    f = os.path.join(d, "summary.json")
    if not os.path.isfile(f):
        return None
    with open(f) as fh:
        s = json.load(fh)
    s["_cpu_s"], s["_rss_kb"] = None, None
    t = os.path.join(d, "time.txt")
    if os.path.isfile(t):
        with open(t) as fh:
            s["_cpu_s"], s["_rss_kb"] = parse_time(fh.read())
    s["_commit"] = "-"
    r = os.path.join(d, "run.json")
    if os.path.isfile(r):
        with open(r) as fh:
            s["_commit"] = json.load(fh).get("commit", "-")
    return s


def load(d):
    runs = {}
    for p in sorted(os.listdir(d)):
        s = load_run(os.path.join(d, p))
        if s is not None:
            runs[p] = s
    return dict(sorted(runs.items(), key=lambda kv: policy_order(kv[0])))


def policy_order(p):
    """Sort key: the policies of ORDER in its order, then the others by name."""
    return (ORDER.index(p) if p in ORDER else len(ORDER), p)


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
             "| CPU s | commit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p, s in runs.items():
        g, w = s["gpu_utilization"], s.get("work_utilization", float("nan"))
        sl = slowdowns(s)
        def ratio(a, b):
            return f"{a / b:.3f}" if b else "-"
        cpu = cpu_cell(s["_cpu_s"])
        lines.append(
            f"| {p} | {g:.4f} | {w:.4f} | "
            f"{ratio(g, ideal['gpu_utilization']) if ideal else '-'} | "
            f"{ratio(w, ideal['work_utilization']) if ideal else '-'} | "
            f"{ratio(crux['gpu_utilization'], g) if crux else '-'} | "
            f"{ratio(crux['work_utilization'], w) if crux else '-'} | "
            f"{(sum(sl) / len(sl)) if sl else 0:.4f} | {pct(sl, 0.99):.3f} | "
            f"{sum(1 for x in sl if x > 1.01)} | {s.get('events', 0):,} | {cpu} | {s['_commit']} |")
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
            "| crux / sincronia (GPU, work) | crux / cassini (GPU, work) | CPU s | commit |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
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
                    f"{pair('ecmp')} | {pair('sincronia')} | {pair('cassini')} | "
                    f"{cpu_cell(total_cpu(runs.values()))} | {commits(runs.values())} |")
    return "\n".join(rows) + "\n"


def fidelity(summary_out, phases_out):
    """Single-overlap summary against phase level, scenario by scenario (docs/evaluation.md
    section 12, "Phase level, 6 h")."""
    rows = ["| scenario | policy | GPU util: summary / phases | work util: summary / phases | "
            "crux / policy, GPU: summary / phases (phases / summary) | crux / policy, work: "
            "summary / phases | CPU s: summary / phases | commit (phases) |",
            "|---|---|---|---|---|---|---|---|"]
    base = dict(scenarios(summary_out))
    for name, ph in scenarios(phases_out):
        so = base.get(name)
        if so is None:
            continue
        cs, cp = so["crux"], ph["crux"]
        for p, r in ph.items():
            if p not in so:
                continue
            q = so[p]
            rs = cs["gpu_utilization"] / q["gpu_utilization"] if q["gpu_utilization"] else 0
            rp = cp["gpu_utilization"] / r["gpu_utilization"] if r["gpu_utilization"] else 0
            ws = cs["work_utilization"] / q["work_utilization"] if q["work_utilization"] else 0
            wp = cp["work_utilization"] / r["work_utilization"] if r["work_utilization"] else 0
            rows.append(
                f"| {name} | {p} | {q['gpu_utilization']:.4f} / {r['gpu_utilization']:.4f} | "
                f"{q['work_utilization']:.4f} / {r['work_utilization']:.4f} | "
                f"{rs:.3f} / {rp:.3f} ({rp / rs if rs else 0:.3f}) | {ws:.3f} / {wp:.3f} | "
                f"{cpu_cell(q['_cpu_s'])} / {cpu_cell(r['_cpu_s'])} | {r['_commit']} |")
    return "\n".join(rows) + "\n"


PRIORITY_POLICIES = ["crux", "crux-ps", "crux-ps-pa", "crux-guard", "crux-pa", "ecmp", "sincronia",
                     "taccl", "ideal"]


def priorities(out):
    """One row per OUT/<scenario>/: GPU utilisation of each policy (work utilisation after a
    slash where the two differ at 4 decimals), then the priorities' contribution in points of
    GPU utilisation: crux - crux-ps (Crux's paths, with and without its levels) and crux-pa -
    ecmp (ECMP paths, with and without them), crux - the best baseline, and the CPU seconds of
    all the scenario's runs (user + system, /usr/bin/time)."""
    head = ["scenario"] + PRIORITY_POLICIES + [
        "crux - crux-ps (pts)", "crux-pa - ecmp (pts)", "crux - best baseline (pts)", "CPU s",
        "commit"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, runs in scenarios(out):
        def diff(a, b):
            if a not in runs or b not in runs:
                return "-"
            return f"{100 * (runs[a]['gpu_utilization'] - runs[b]['gpu_utilization']):+.2f}"
        best = best_baseline(runs)
        cpu = total_cpu(runs.values())
        rows.append("| " + " | ".join(
            [name] + [util_cell(runs[p]) if p in runs else "-" for p in PRIORITY_POLICIES] +
            [diff("crux", "crux-ps"), diff("crux-pa", "ecmp"),
             (diff("crux", best) + f" ({best})") if best else "-", cpu_cell(cpu),
             commits(runs.values())]) + " |")
    return "\n".join(rows) + "\n"


def commits(runs):
    return ", ".join(sorted({r["_commit"] for r in runs}))


def total_cpu(runs):
    """The CPU seconds of runs together, None when no run has a time report."""
    cpus = [r["_cpu_s"] for r in runs if r["_cpu_s"] is not None]
    return sum(cpus) if cpus else None


def cpu_cell(cpu):
    return "-" if cpu is None else (f"{cpu:.1f}" if cpu < 10 else f"{cpu:.0f}")


def util_cell(s):
    """GPU utilisation, and work utilisation after a slash where the two differ at 4 decimals."""
    g = s["gpu_utilization"]
    w = s.get("work_utilization", g)
    return f"{g:.4f}" if abs(g - w) <= 0.00005 else f"{g:.4f} / {w:.4f}"


def all_runs(d):
    """(relative name, summary) of every run directory under d, at any depth, by name."""
    found = []
    for root, dirs, files in os.walk(d):
        dirs.sort()
        if "summary.json" in files:
            s = load_run(root)
            if s is not None:
                found.append((os.path.relpath(root, d), s))
    return found


def runs_table(d):
    rows = ["| run | GPU util | work util | mean slowdown | p99 slowdown | iterations | events "
            "| CPU s | peak RSS MB | commit |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in all_runs(d):
        sl = slowdowns(s)
        rss = f"{s['_rss_kb'] / 1024:.0f}" if s["_rss_kb"] else "-"
        rows.append(f"| {name} | {s['gpu_utilization']:.6f} | "
                    f"{s.get('work_utilization', float('nan')):.6f} | "
                    f"{(sum(sl) / len(sl)) if sl else 0:.4f} | {pct(sl, 0.99):.3f} | "
                    f"{sum(j.get('iterations', 0) for j in s.get('jobs', [])):,} | "
                    f"{s.get('events', 0):,} | {cpu_cell(s['_cpu_s'])} | {rss} | "
                    f"{s['_commit']} |")
    return "\n".join(rows) + "\n"


def matrix(d):
    """Rows d/<row>/ (in name order), columns the policies found under them (ORDER first)."""
    rows = {}
    for name in sorted(os.listdir(d)):
        if os.path.isdir(os.path.join(d, name)):
            r = load(os.path.join(d, name))
            if r:
                rows[name] = r
    policies = sorted({p for r in rows.values() for p in r}, key=policy_order)
    bases = [b for b in ("ecmp", "sincronia", "cassini") if b in policies and "crux" in policies]
    head = (["row"] + policies + ["crux / best baseline (GPU)"] + [f"crux / {b}" for b in bases] +
            ["CPU s", "commit"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, runs in rows.items():
        best = best_baseline(runs)
        ratio = "-"
        if best and "crux" in runs and runs[best]["gpu_utilization"]:
            ratio = (f"{runs['crux']['gpu_utilization'] / runs[best]['gpu_utilization']:.3f} "
                     f"({best})")
        cpu = total_cpu(runs.values())
        out.append("| " + " | ".join(
            [name] + [util_cell(runs[p]) if p in runs else "-" for p in policies] +
            [ratio] + [f"{runs['crux']['gpu_utilization'] / runs[b]['gpu_utilization']:.3f}"
                       if "crux" in runs and b in runs and runs[b]["gpu_utilization"] else "-"
                       for b in bases] +
            [cpu_cell(cpu), commits(runs.values())]) + " |")
    return "\n".join(out) + "\n"


def loss(d, a, b):
    rows = [f"| row | {a} vs {b}: GPU-s lost | gained | mean slowdown {a} | mean slowdown {b} |",
            "|---|---|---|---|---|"]
    for name in sorted(os.listdir(d)):
        ra, rb = load_run(os.path.join(d, name, a)), load_run(os.path.join(d, name, b))
        if ra is None or rb is None:
            continue
        busy = {j["id"]: j for j in rb.get("jobs", [])}
        lost = gained = 0.0
        for j in ra.get("jobs", []):
            other = busy.get(j["id"])
            if other is None:
                continue
            delta = (other.get("compute_busy_s", 0) - j.get("compute_busy_s", 0)) * j["gpus"]
            if delta > 0:
                lost += delta
            else:
                gained -= delta
        rows.append(f"| {name} | {lost:,.0f} | {gained:,.0f} | {ra.get('mean_slowdown', 0):.3f} "
                    f"| {rb.get('mean_slowdown', 0):.3f} |")
    return "\n".join(rows) + "\n"


def traces(d):
    rows = ["| trace | jobs | offered load | jobs that may contend | GPUs of those jobs "
            "| jobs >= 128 GPUs | peak jobs / GPUs |", "|---|---|---|---|---|---|---|"]
    for f in sorted(os.listdir(d)):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(d, f)) as fh:
            t = json.load(fh)
        rows.append(f"| {f[:-5]} | {t['jobs']:,} | {t.get('offered_load', 0):.2f} | "
                    f"{100 * t.get('share_jobs_may_contend', 0):.1f}% | "
                    f"{100 * t.get('share_gpus_may_contend', 0):.1f}% | "
                    f"{100 * t.get('share_ge_128_gpus', 0):.1f}% | "
                    f"{t.get('peak_concurrent_jobs', 0)} / {t.get('peak_gpus', 0):,} |")
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
    elif len(argv) == 3 and argv[1] == "--runs":
        sys.stdout.write(runs_table(argv[2]))
    elif len(argv) == 3 and argv[1] == "--matrix":
        sys.stdout.write(matrix(argv[2]))
    elif len(argv) == 5 and argv[1] == "--loss":
        sys.stdout.write(loss(argv[2], argv[3], argv[4]))
    elif len(argv) == 4 and argv[1] == "--fidelity":
        sys.stdout.write(fidelity(argv[2], argv[3]))
    elif len(argv) == 3 and argv[1] == "--traces":
        sys.stdout.write(traces(argv[2]))
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

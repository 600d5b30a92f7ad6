#!/usr/bin/python3
"""Random small contended cases for docs/evaluation.md section 14 (issue #30 item 3).

  eval_small_cases.py [--build DIR] [--out DIR] [--cases N] [--seed S] [--horizon-s H] [-j N]

Each case is a trace of 2-4 multi-host jobs that all start at t = 0 and run to the horizon on
configs/topologies/small_1nic.yaml (8 hosts, one NIC each, 2 ToRs, 2:1 above them). A job takes
4 GPUs on each of 2, 4 or 8 hosts drawn at random, never more than 8 GPUs on a host, so jobs
share hosts and so their only NIC: the contention path choice cannot avoid. Models are drawn
among the single-pattern profiles of configs/models.yaml that accept the job's size. Every case
runs under each policy (`crux-sim run --trace`); the table gives, over the cases, what the
priorities add where the paths are Crux's (crux-ps-pa - crux-ps), what `crux` (8 levels,
stable re-planning) and the paper's baselines get, and the headroom ideal - crux-ps that bounds
what any priority scheme could add. Deterministic for a seed.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_table import parse_time  # noqa: E402  (the one /usr/bin/time parser)

POLICIES = ["crux", "crux-ps", "crux-ps-pa", "crux-guard", "crux-pa", "ecmp", "sincronia",
            "taccl", "ideal"]
HOSTS = 8
GPUS = 8


def models(path):
    """(name, min_gpus, max_gpus) of the single-pattern profiles."""
    out = []
    for block in re.split(r"\n  - name: ", open(path).read())[1:]:
        name = block.split("\n", 1)[0].strip()
        if re.search(r"\n    parallelism: hybrid", block):
            continue
        lo = re.search(r"\n    min_gpus: (\d+)", block)
        hi = re.search(r"\n    max_gpus: (\d+)", block)
        out.append((name, int(lo.group(1)) if lo else 1, int(hi.group(1)) if hi else 1 << 20))
    return out


def make_case(rng, catalog):
    n = rng.choice([2, 3, 4])
    free = [GPUS] * HOSTS
    rows = []
    for j in range(n):
        for _ in range(100):
            h = rng.choice([2, 4, 8])
            open_hosts = [i for i in range(HOSTS) if free[i] >= 4]
            if len(open_hosts) < h:
                continue
            hosts = sorted(rng.sample(open_hosts, h))
            fits = [m for m in catalog if m[1] <= 4 * h <= m[2]]
            if not fits:
                continue
            for i in hosts:
                free[i] -= 4
            model = rng.choice(fits)[0]
            rows.append(f"c{j},0,,,{4 * h},{';'.join(f'host{i}' for i in hosts)},{model}")
            break
    return rows


def run(sim, topo, trace, policy, horizon, out):
    os.makedirs(out, exist_ok=True)
    cmd = ["/usr/bin/time", "-o", os.path.join(out, "time.txt"), sim, "run",
           "--topology", topo, "--trace", trace, "--policy", policy, "--horizon-s", str(horizon),
           "--out", out, "--quiet", "--no-plots"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{trace} {policy}: {r.stderr.strip()[-300:]}")
    with open(os.path.join(out, "summary.json")) as f:
        gpu = json.load(f)["gpu_utilization"]
    with open(os.path.join(out, "time.txt")) as f:
        cpu = parse_time(f.read())[0] or 0.0
    return gpu, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build/test")
    ap.add_argument("--out", default="eval-small")
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--horizon-s", type=float, default=600)
    ap.add_argument("-j", type=int, default=2)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sim = os.path.join(root, a.build, "sim/cli/crux-sim")
    topo = os.path.join(root, "configs/topologies/small_1nic.yaml")
    catalog = models(os.path.join(root, "configs/models.yaml"))
    rng = random.Random(a.seed)
    tasks = []
    for c in range(a.cases):
        d = os.path.join(a.out, f"case{c:03d}")
        os.makedirs(d, exist_ok=True)
        trace = os.path.join(d, "trace.csv")
        with open(trace, "w") as f:
            f.write("job_id,arrival_s,duration_s,iterations,gpus,placement,model\n")
            f.write("\n".join(make_case(rng, catalog)) + "\n")
        for p in POLICIES:
            tasks.append((c, p, trace, os.path.join(d, p)))
    with ThreadPoolExecutor(max_workers=a.j) as ex:
        futs = {(c, p): ex.submit(run, sim, topo, t, p, a.horizon_s, o) for c, p, t, o in tasks}
    res = {k: f.result() for k, f in futs.items()}
    util = {k: v[0] for k, v in res.items()}
    cpu = sum(v[1] for v in res.values())

    def pts(x, y):
        return [100 * (util[(c, x)] - util[(c, y)]) for c in range(a.cases)]

    def summary(vals):
        return (f"{statistics.mean(vals):+.2f} | {min(vals):+.2f} | {max(vals):+.2f} | "
                f"{sum(v > 1 for v in vals)} | {sum(v < -1 for v in vals)}")
    print(f"{a.cases} cases, seed {a.seed}, {a.horizon_s:.0f} s each, CPU {cpu:.0f} s "
          f"(commit {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=root, capture_output=True, text=True).stdout.strip()})")
    print()
    print("| points of GPU utilisation, per case | mean | min | max | cases > +1 | cases < -1 |")
    print("|---|---|---|---|---|---|")
    for label, x, y in [("headroom: ideal - crux-ps", "ideal", "crux-ps"),
                        ("priorities on Crux paths: crux-ps-pa - crux-ps", "crux-ps-pa", "crux-ps"),
                        ("guarded priorities: crux-guard - crux-ps", "crux-guard", "crux-ps"),
                        ("crux (8 levels, stable) - crux-ps", "crux", "crux-ps"),
                        ("priorities on ECMP paths: crux-pa - ecmp", "crux-pa", "ecmp"),
                        ("crux - ecmp", "crux", "ecmp"),
                        ("crux - sincronia", "crux", "sincronia"),
                        ("crux - taccl", "crux", "taccl")]:
        print(f"| {label} | {summary(pts(x, y))} |")
    print()
    print("| policy | mean GPU utilisation |")
    print("|---|---|")
    for p in POLICIES:
        print(f"| {p} | {statistics.mean(util[(c, p)] for c in range(a.cases)):.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

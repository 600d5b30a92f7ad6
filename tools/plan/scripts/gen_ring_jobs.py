#!/usr/bin/python3
"""Writes a crux-plan jobs YAML of N ring all-reduce jobs over 2-4 random hosts.

Used to measure crux-plan at scale (docs/algorithms.md, "Scale"); the output is deterministic
for a given --seed. Keep generated files out of git (write them under /tmp or build/).

  tools/plan/scripts/gen_ring_jobs.py --jobs 10000 --hosts 16 > /tmp/jobs10k.yaml
  /usr/bin/time -v crux-plan --topology configs/topologies/example_clos2.yaml \
      --jobs /tmp/jobs10k.yaml > /dev/null
"""
import argparse
import random
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, required=True, help="number of jobs")
    ap.add_argument("--hosts", type=int, default=16, help="hosts host0..hostN-1 of the topology")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.jobs < 0 or args.hosts < 2:
        ap.error("--jobs must be >= 0 and --hosts >= 2")
    rng = random.Random(args.seed)
    out = sys.stdout
    out.write("jobs:\n")
    for j in range(args.jobs):
        hosts = rng.sample(range(args.hosts), rng.randint(2, min(4, args.hosts)))
        compute = rng.choice((0.05, 0.1, 0.2, 0.4, 0.8))
        size = rng.choice((1e8, 2e8, 5e8, 1e9, 2e9))
        out.write(f"  - {{id: job{j}, hosts: [{', '.join(f'host{h}' for h in hosts)}], "
                  f"compute_time_s: {compute}, traffic: {{pattern: ring_allreduce, "
                  f"bytes: {size:g}}}}}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
# Writes a crux-plan jobs YAML of the multi-host jobs a crux-sim trace has running at time T,
# so that `crux-plan --policy P` shows the plan (k_j, P_j, levels, DAG edges; guarded edges of
# crux-guard / crux-pa-guard have weight 0) a policy computes at that moment
# (docs/evaluation.md section 11). Single-host jobs are left out: they share no fabric link.
# Usage: scripts/trace_jobs_at.py TRACE.csv T_SECONDS [MODELS.yaml] > jobs.yaml
# Needs python3-yaml (Debian), hence /usr/bin/python3.
import csv
import os
import sys

import yaml

PATTERN = {'data': 'ring_allreduce', 'pipeline': 'pipeline', 'embedding': 'all_to_all'}


def main():
    if len(sys.argv) < 3:
        sys.exit('usage: trace_jobs_at.py TRACE.csv T_SECONDS [MODELS.yaml]')
    trace, t = sys.argv[1], float(sys.argv[2])
    models_path = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        os.path.dirname(__file__), '..', 'configs', 'models.yaml')
    models = {m['name']: m for m in yaml.safe_load(open(models_path))['models']}
    jobs = []
    for row in csv.DictReader(open(trace)):
        start = float(row['arrival_s'])
        if not row['duration_s'] or not start <= t < start + float(row['duration_s']):
            continue
        m = models[row['model']]
        hosts = row['placement'].split(';')
        if len(hosts) < 2 or m['parallelism'] not in PATTERN:
            continue  # Single-host, or a hybrid profile (explicit flows): not converted.
        size = m['gradient_bytes'] if m['parallelism'] == 'data' else m['activation_bytes']
        jobs.append({'id': row['job_id'], 'hosts': hosts,
                     'gpus_per_host': int(row['gpus']) // len(hosts),
                     'compute_time_s': m['compute_time_s'], 'overlap_start': m['overlap_start'],
                     'traffic': {'pattern': PATTERN[m['parallelism']], 'bytes': float(size)}})
    yaml.safe_dump({'jobs': jobs}, sys.stdout, default_flow_style=None)


if __name__ == '__main__':
    main()

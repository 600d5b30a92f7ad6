#!/usr/bin/python3
"""Checks cruxd's shadow accounting (docs/impact.md) against the simulator's truth.

Reads two crux-sim summaries of the same trace: one under `crux` run with --impact, one under
`ecmp` (same seed), and prints one JSON line:

  jobs                 jobs that ran scheduled under a prediction (the crux run)
  error_p50/p90/max    |observed - predicted| / observed of the crux run's jobs (observed: the mean
                       of the iterations they completed while the prediction was in force)
  within_5pct          the share of those jobs predicted within 5 %
  ecmp_error_p50/p90   the counterfactual against the ecmp run: |ecmp mean iteration -
                       predicted ECMP iteration| / ecmp mean iteration, per job
  ecmp_within_5pct
  recovered_predicted  sum over jobs of GPUs x (1 - predicted / predicted ECMP) x the time it ran
                       under the prediction / the horizon (the crux run's predicted_gpus_recovered
                       restricted to the jobs compared)
  recovered_measured   the same with the simulated iterations: GPUs x (1 - observed crux /
                       ecmp run's mean iteration), same weights
  recovered_ratio      predicted / measured

Usage: scripts/eval_impact.py CRUX_SUMMARY.json ECMP_SUMMARY.json
"""
import json
import sys


def quantile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    crux = json.load(open(argv[1]))
    ecmp = json.load(open(argv[2]))
    if "impact" not in crux:
        sys.stderr.write(f"{argv[1]}: no impact block (run crux-sim with --impact)\n")
        return 1
    horizon = max((j.get("arrival_s", 0) + j.get("jct_s", 0) for j in crux["jobs"]), default=0)
    base = {j["id"]: j for j in ecmp["jobs"]}
    err, ecmp_err = [], []
    rec_pred = rec_meas = 0.0
    for j in crux["jobs"]:
        if "predicted_iteration_s" not in j:
            continue
        obs, pred = j["observed_iteration_s"], j["predicted_iteration_s"]
        pred_ecmp = j["predicted_ecmp_iteration_s"]
        if obs > 0:
            err.append(abs(obs - pred) / obs)
        b = base.get(j["id"])
        if b is None or not b.get("iterations") or b["mean_iteration_s"] <= 0:
            continue
        obs_ecmp = b["mean_iteration_s"]
        ecmp_err.append(abs(obs_ecmp - pred_ecmp) / obs_ecmp)
        w = j["gpus"] * j["predicted_for_s"] / horizon if horizon > 0 else 0
        if pred_ecmp > 0:
            rec_pred += w * (1 - pred / pred_ecmp)
        rec_meas += w * (1 - obs / obs_ecmp)
    out = {
        "jobs": len(err),
        "error_p50": quantile(err, 0.5),
        "error_p90": quantile(err, 0.9),
        "error_max": max(err) if err else None,
        "within_5pct": sum(e <= 0.05 for e in err) / len(err) if err else None,
        "ecmp_jobs": len(ecmp_err),
        "ecmp_error_p50": quantile(ecmp_err, 0.5),
        "ecmp_error_p90": quantile(ecmp_err, 0.9),
        "ecmp_within_5pct": sum(e <= 0.05 for e in ecmp_err) / len(ecmp_err) if ecmp_err else None,
        "recovered_predicted": rec_pred,
        "recovered_measured": rec_meas,
        "recovered_ratio": rec_pred / rec_meas if rec_meas else None,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

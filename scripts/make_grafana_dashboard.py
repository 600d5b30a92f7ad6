#!/usr/bin/python3
"""Writes packaging/grafana/crux-overview.json, the Grafana dashboard shipped with cruxd.

The dashboard is generated so that its panels stay uniform (one datasource variable, one grid);
edit the PANELS table below and run this script (tests/packaging check that the committed JSON is
what it generates and that every series it uses exists on a live cruxd).

Usage: scripts/make_grafana_dashboard.py [OUT]   (default packaging/grafana/crux-overview.json)
"""
import json
import os
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}

# (title, kind, unit, [(expr, legend)], description)
PANELS = [
    ("GPU-hours recovered per hour (vs ECMP, predicted)", "stat", "none",
     [("max(crux_impact_gpus_recovered)", "recovered")],
     "Sum over planned jobs of GPUs x (1 - predicted under the plan / predicted under ECMP): "
     "docs/impact.md."),
    ("Recovered and planned GPUs", "timeseries", "none",
     [("max(crux_impact_gpus_recovered)", "recovered"),
      ("max(crux_impact_planned_gpus)", "planned GPUs")],
     "What the plan in force recovers against ECMP, out of the GPUs it plans."),
    ("Prediction error (scheduled jobs)", "timeseries", "percentunit",
     [("histogram_quantile(0.5, sum by (le) (rate(crux_impact_prediction_error_bucket[15m])))",
       "median"),
      ("histogram_quantile(0.9, sum by (le) (rate(crux_impact_prediction_error_bucket[15m])))",
       "p90")],
     "|observed - predicted| / observed iteration time; `cruxctl impact` names the jobs."),
    ("Re-plan latency", "timeseries", "s",
     [("histogram_quantile(0.5, sum by (le) (rate(crux_replan_duration_seconds_bucket[5m])))",
       "p50"),
      ("histogram_quantile(0.99, sum by (le) (rate(crux_replan_duration_seconds_bucket[5m])))",
       "p99")],
     "Wall time of one re-plan on the worker (planner, diff, switch states, accounting)."),
    ("Re-plans", "timeseries", "ops",
     [("sum by (result) (rate(crux_replans_total[5m]))", "{{result}}")],
     "Re-plans per second by result."),
    ("Event-loop lag p99", "timeseries", "s",
     [("histogram_quantile(0.99, sum by (instance, le) "
       "(rate(crux_event_loop_lag_seconds_bucket[5m])))", "{{instance}}")],
     "Time from posting work to cruxd's event loop until it runs."),
    ("Jobs by state", "timeseries", "none",
     [("max by (state) (crux_jobs)", "{{state}}")],
     "registered, profiling, scheduled."),
    ("Switches: enforcement verified", "timeseries", "none",
     [("max by (state) (crux_switch_enforcement)", "{{state}}")],
     "Switches whose ASIC maps and queue counters match the plan (match), contradict it "
     "(mismatch) or could not be checked (unknown): `cruxctl switches`."),
    ("Links not up", "timeseries", "none",
     [("max by (health) (crux_links_not_up)", "{{health}}")],
     "Directed links down or degraded (automatic or admin): `cruxctl faults`, `cruxctl links`."),
    ("Link health changes", "timeseries", "ops",
     [("sum by (source, health) (rate(crux_link_changes_total[5m]))", "{{source}} {{health}}")],
     "Decisions per second, automatic or by an operator."),
    ("HA: leader", "timeseries", "none",
     [("crux_ha_leader", "{{instance}}")],
     "1 on the instance that leads; a single cruxd without `ha:` always leads."),
    ("Store healthy", "stat", "none",
     [("min(crux_store_healthy)", "healthy")],
     "0 while state writes fail: re-plans are not applied."),
]


def panel(i, title, kind, unit, targets, description):
    w, h = (6, 4) if kind == "stat" else (12, 8)
    return {
        "id": i + 1,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": 0, "y": 0},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + k), "datasource": DS, "expr": e, "legendFormat": legend}
            for k, (e, legend) in enumerate(targets)
        ],
    }


def layout(panels):
    x = y = row_h = 0
    for p in panels:
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p["gridPos"].update({"x": x, "y": y})
        x += w
        row_h = max(row_h, h)
    return panels


def dashboard():
    return {
        "uid": "crux-overview",
        "title": "Crux overview",
        "description": "cruxd: what the plan gains, how fast it plans, whether switches enforce "
                       "it, faults and HA (docs/impact.md).",
        "tags": ["crux"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{
            "name": "datasource", "label": "Prometheus", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0}]},
        "panels": layout([panel(i, *p) for i, p in enumerate(PANELS)]),
    }


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = argv[1] if len(argv) > 1 else os.path.join(root, "packaging/grafana/crux-overview.json")
    with open(out, "w") as f:
        json.dump(dashboard(), f, indent=2, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

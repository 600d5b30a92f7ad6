#!/usr/bin/env python3
"""Checks the layering rules of docs/architecture.md ("Layers") on every #include.

A component is split into groups (folders) in a fixed order. A file of a group may include its own
group and the groups listed before it, never one listed after it, and never a group it is kept
apart from. Headers (include/crux/<c>/<group>/) and sources (src/<group>/) follow the same rule, and
so do the tests that mirror them (tests/<c>/<group>/). A violation names the file, the line, the
include and the rule it breaks; the exit status is 1 if there is any. ./test.sh runs this first.

Usage: scripts/check_layers.py [ROOT]   (ROOT defaults to the checkout this script is in)
"""
import os
import re
import sys

# component: (include prefix, folders whose files are checked, layers in order, apart pairs)
RULES = {
    "core": {
        "prefix": "crux/core/",
        "roots": ["core/include/crux/core", "core/src", "tests/core"],
        "layers": ["base", "topology", "model", "plan", "faults", "policies", "control"],
        "apart": [("plan", "faults")],
        # core is the pure library: it includes no other crux component.
        "only_own": ["core/include", "core/src"],
    },
    "daemon": {
        "prefix": "crux/daemon/",
        "roots": ["daemon/include/crux/daemon", "daemon/src"],
        "layers": ["config", "runtime", "store", "ha", "state", "control", "rpc", "app"],
        "apart": [],
    },
    # The simulator's parts include each other as "group/file.h"; the wiring (simulator.cc at the
    # top of sim/src) is above them all, and only it includes crux/sim/simulator.h (the parts use
    # the value types of crux/sim/sim_types.h).
    "sim": {
        "prefix": "",
        "roots": ["sim/src"],
        "layers": ["engine", "network", "metrics", "jobs", "control", "steady", "faults", "top"],
        "apart": [("steady", "faults")],
        "root_group": "top",
        "aliases": {"crux/sim/simulator.h": "top"},
    },
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def group_of(path_in_component, layers, root_group=None):
    if "/" not in path_in_component:
        return root_group
    first = path_in_component.split("/", 1)[0]
    return first if first in layers else None


def check(root):
    errors = []
    for name, rule in RULES.items():
        layers = rule["layers"]
        rank = {g: i for i, g in enumerate(layers)}
        apart = {frozenset(p) for p in rule["apart"]}
        for base in rule["roots"]:
            top = os.path.join(root, base)
            for dirpath, _, files in os.walk(top):
                for f in sorted(files):
                    if not f.endswith((".h", ".cc")):
                        continue
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, top)
                    own = group_of(rel, layers, rule.get("root_group"))
                    shown = os.path.relpath(path, root)
                    if own is None:
                        if base != "tests/core":
                            errors.append(f"{shown}: not in a group of {name}/ "
                                          f"(groups: {', '.join(layers)})")
                        continue
                    pure = any(shown.startswith(p + "/") for p in rule.get("only_own", []))
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        for n, line in enumerate(fh, 1):
                            m = INCLUDE.match(line)
                            if not m:
                                continue
                            inc = m.group(1)
                            where = f"{shown}:{n}: #include \"{inc}\""
                            if inc in rule.get("aliases", {}):
                                target = rule["aliases"][inc]
                            elif rule["prefix"] and inc.startswith(rule["prefix"]):
                                target = group_of(inc[len(rule["prefix"]):], layers)
                                if target is None:
                                    errors.append(f"{where}: {inc} is in no group of {name}/")
                                    continue
                            elif not rule["prefix"] and not inc.startswith("crux/"):
                                target = group_of(inc, layers)
                                if target is None:
                                    continue  # A library's header (e.g. the client's profiler.h).
                            else:
                                if pure and inc.startswith("crux/"):
                                    errors.append(f"{where}: {name}/ includes no other crux "
                                                  f"component (it is the pure library)")
                                continue
                            if target is None:
                                continue
                            elif frozenset((own, target)) in apart:
                                errors.append(f"{where}: {own}/ and {target}/ never include "
                                              f"each other")
                            elif rank[target] > rank[own]:
                                errors.append(f"{where}: {own}/ may include only "
                                              f"{', '.join(layers[:rank[own] + 1])} "
                                              f"({target}/ comes after {own}/)")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    errors = check(root)
    for e in errors:
        print("layering: " + e, file=sys.stderr)
    if errors:
        print(f"layering: {len(errors)} include(s) break the rules (docs/architecture.md, "
              f"\"Layers\")", file=sys.stderr)
        return 1
    print("layering: every include follows the rules of docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

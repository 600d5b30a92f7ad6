#!/usr/bin/env bash
# The layering check (scripts/check_layers.py) passes on the tree and fails, naming the rule, on a
# copy of the tree with one planted violation per rule: an upward include in core (base/ including
# plan/), plan/ and faults/ including each other, core including another component, an upward
# include in cruxd (state/ including rpc/), and a simulator part including simulator.h.
# Usage: check_layers_test.sh SOURCE_DIR
set -euo pipefail
src=$1
check=$src/scripts/check_layers.py
/usr/bin/python3 "$check" "$src" >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Only the folders the check reads.
for d in core daemon/include daemon/src sim/src tests/core; do
  mkdir -p "$work/$(dirname "$d")"
  cp -r "$src/$d" "$work/$d"
done

plant() {  # FILE INCLUDE EXPECTED-MESSAGE
  local file=$work/$1 saved
  saved=$(mktemp)
  cp "$file" "$saved"
  printf '#include "%s"\n' "$2" >>"$file"
  local out rc=0
  out=$(/usr/bin/python3 "$check" "$work" 2>&1) || rc=$?
  cp "$saved" "$file"
  rm -f "$saved"
  if [[ $rc -ne 1 ]]; then
    echo "FAIL: $1 including $2: check exited $rc, expected 1" >&2
    exit 1
  fi
  if ! grep -qF "$3" <<<"$out"; then
    echo "FAIL: $1 including $2: expected \"$3\" in:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "ok: $1 including $2 -> $(grep -F "$3" <<<"$out" | head -1)"
}

plant core/include/crux/core/base/units.h crux/core/plan/planner.h \
  "base/ may include only base (plan/ comes after base/)"
plant core/src/faults/fault_manager.cc crux/core/plan/planner.h \
  "faults/ and plan/ never include each other"
plant core/src/plan/planner.cc crux/core/faults/fault_manager.h \
  "plan/ and faults/ never include each other"
plant core/src/topology/ecmp.cc crux/protocol/codec.h \
  "core/ includes no other crux component"
plant tests/core/model/job_test.cc crux/core/control/control_loop.h \
  "model/ may include only base, topology, model (control/ comes after model/)"
plant daemon/src/state/enforcer.cc crux/daemon/rpc/gateway.h \
  "state/ may include only config, runtime, store, ha, state (rpc/ comes after state/)"
plant sim/src/network/fabric.h crux/sim/simulator.h \
  "network/ may include only engine, network (top/ comes after network/)"
# The copy is back to the original: the check passes again.
/usr/bin/python3 "$check" "$work" >/dev/null
echo "check_layers: every planted violation was found"

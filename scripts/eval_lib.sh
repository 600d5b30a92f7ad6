# shellcheck shell=bash
# Shared by the scripts that regenerate docs/evaluation.md (scripts/eval_s*.sh, one per section,
# and scripts/eval_fig23.sh): common options, the list of crux-sim runs, running it in parallel
# under /usr/bin/time, and what each run records. Source it, never run it.
#
# Sourcing it (`source "$(dirname "$0")/eval_lib.sh"`) sets bash's strict mode and moves to the
# repository root. A section script then calls, in order:
#   eval_options OUT "$@"      parses --build DIR, --out DIR (default OUT), -j N, --force,
#                              --dry-run, -h and leaves the rest in EVAL_ARGS (the section's own
#                              options);
#   eval_trace NAME ARGS...    `crux-sim gen-trace ARGS... --out $EVAL_OUT/traces/NAME.csv` at
#                              once (cheap); its JSON report goes to traces/NAME.json;
#   eval_add NAME ARGS...      queues `crux-sim ARGS... --out $EVAL_OUT/NAME` (NAME may hold
#                              slashes: "clos_main/crux");
#   eval_go                    runs the queue, EVAL_JOBS at a time; returns 1 if any run failed;
#   eval_table ARGS...         scripts/eval_table.py ARGS... (the section's tables).
#
# Every run directory holds what crux-sim wrote (summary.json, CSVs) and:
#   cmd.txt     the crux-sim arguments, one per line;
#   time.txt    /usr/bin/time's report in its default format (user and system CPU s, peak RSS);
#   run.json    the commit of the checkout (with "-dirty" when tracked files that go into crux-sim
#               differ from it: everything but docs/, scripts/, tests/ and Markdown), the
#               crux-sim binary and its modification time, the host and the start time (UTC);
#   stdout.txt, stderr.txt.
# A run whose summary.json exists and whose cmd.txt and commit match is not run again (a section
# interrupted half-way resumes); --force runs everything. The commit names the checkout, not the
# build: build crux-sim from the same tree first (the scripts refuse a binary older than a tracked
# source or CMake file outside tests/).

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The script's header comment (from its second line to the first line that is not a comment, or
# is a shellcheck directive).
eval_help() {
  awk 'NR > 1 && /^# shellcheck/ { exit } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next }
       NR > 1 { exit }' "$0"
}

eval_usage_common() {
  cat << 'EOF'
Common options: --build DIR (default build/test), --out DIR (default eval-<section>),
  -j N (runs at a time, default 2), --force (re-run runs already done), --dry-run (print the
  crux-sim command lines and stop), -h/--help.
EOF
}

eval_options() {
  EVAL_BUILD=build/test
  EVAL_OUT=$1
  shift
  EVAL_JOBS=2
  EVAL_FORCE=0
  EVAL_DRY=0
  EVAL_ARGS=()
  while (($#)); do
    case "$1" in
      --build) EVAL_BUILD=$2; shift 2 ;;
      --out) EVAL_OUT=$2; shift 2 ;;
      -j) EVAL_JOBS=$2; shift 2 ;;
      --force) EVAL_FORCE=1; shift ;;
      --dry-run) EVAL_DRY=1; shift ;;
      -h|--help) eval_help; eval_usage_common; exit 0 ;;
      *) EVAL_ARGS+=("$1"); shift ;;
    esac
  done
  EVAL_SIM="${CRUX_SIM:-$EVAL_BUILD/sim/cli/crux-sim}"
  if [[ ! -x $EVAL_SIM ]]; then
    echo "$(basename "$0"): $EVAL_SIM is not built (cmake --build $EVAL_BUILD --target crux-sim)" >&2
    exit 2
  fi
  # Documentation, scripts and tests do not go into crux-sim: neither a newer commit nor an edit
  # of them makes the binary stale or the checkout dirty.
  local code=(. ':!docs' ':!scripts' ':!tests' ':!*.md')
  local code_time
  code_time=$(git ls-files -z -- '*.cc' '*.h' '*.proto' '*CMakeLists.txt' '*.cmake' ':!tests' \
      2> /dev/null | xargs -0 -r stat -c %Y 2> /dev/null | sort -n | tail -1)
  if (($(stat -c %Y "$EVAL_SIM") < ${code_time:-0})) && [[ -z ${CRUX_SIM:-} ]]; then
    echo "$(basename "$0"): $EVAL_SIM is older than the checked-out code; rebuild it first" >&2
    exit 2
  fi
  EVAL_SIM_MTIME=$(stat -c %Y "$EVAL_SIM")
  EVAL_COMMIT=$(git rev-parse --short=10 HEAD 2> /dev/null || echo unknown)
  git diff --quiet HEAD -- "${code[@]}" 2> /dev/null || EVAL_COMMIT="$EVAL_COMMIT-dirty"
  mkdir -p "$EVAL_OUT/traces"
  EVAL_QUEUE="$EVAL_OUT/queue.txt"
  : > "$EVAL_QUEUE"
  export EVAL_SIM EVAL_SIM_MTIME EVAL_OUT EVAL_COMMIT EVAL_FORCE
}

# The unrecognised arguments, for a section that takes none.
eval_no_args() {
  if ((${#EVAL_ARGS[@]})); then
    echo "$(basename "$0"): unknown argument ${EVAL_ARGS[0]}" >&2
    exit 2
  fi
}

eval_trace() {
  local name=$1
  shift
  local csv="$EVAL_OUT/traces/$name.csv"
  if ((EVAL_DRY)); then
    echo "$EVAL_SIM gen-trace $* --out $csv"
    return 0
  fi
  "$EVAL_SIM" gen-trace "$@" --out "$csv" > "$EVAL_OUT/traces/$name.json" || {
    echo "$(basename "$0"): gen-trace $name failed" >&2
    return 1
  }
}

# The path of trace NAME (for eval_add arguments).
eval_trace_csv() { echo "$EVAL_OUT/traces/$1.csv"; }

eval_add() {
  local name=$1
  shift
  # One run per line: the name, then the arguments, tab-separated (no argument holds a tab).
  local IFS=$'\t'
  echo "$name"$'\t'"$*" >> "$EVAL_QUEUE"
}

# Runs one queued line (called through xargs; arguments: the line's fields).
eval_run_one() {
  local name=$1
  shift
  local dir="$EVAL_OUT/$name"
  local args=("$@" --out "$dir")
  mkdir -p "$dir"
  if ((!EVAL_FORCE)) && [[ -f $dir/summary.json && -f $dir/run.json ]] &&
      [[ "$(printf '%s\n' "${args[@]}")" == "$(cat "$dir/cmd.txt" 2> /dev/null)" ]] &&
      grep -q "\"commit\": \"$EVAL_COMMIT\"" "$dir/run.json"; then
    echo "done $name (kept)"
    return 0
  fi
  rm -f "$dir/summary.json"
  # A binary rebuilt while the section runs is no longer the commit's: refuse rather than mix.
  if [[ $(stat -c %Y "$EVAL_SIM") != "$EVAL_SIM_MTIME" ]]; then
    echo "FAIL $name: $EVAL_SIM was rebuilt after the section started"
    return 1
  fi
  printf '%s\n' "${args[@]}" > "$dir/cmd.txt"
  printf '{"commit": "%s", "sim": "%s", "sim_built_utc": "%s", "host": "%s", "started_utc": "%s"}\n' \
      "$EVAL_COMMIT" "$EVAL_SIM" "$(date -u -r "$EVAL_SIM" +%FT%TZ)" "$(hostname)" \
      "$(date -u +%FT%TZ)" > "$dir/run.json"
  local t0=$SECONDS
  if /usr/bin/time -o "$dir/time.txt" "$EVAL_SIM" "${args[@]}" > "$dir/stdout.txt" \
      2> "$dir/stderr.txt"; then
    echo "ok   $name ($((SECONDS - t0)) s wall)"
  else
    echo "FAIL $name: $(tail -1 "$dir/stderr.txt")"
    return 1
  fi
}

eval_go() {
  if ((EVAL_DRY)); then
    local fields
    while IFS=$'\t' read -ra fields; do
      echo "$EVAL_SIM ${fields[*]:1} --out $EVAL_OUT/${fields[0]}"
    done < "$EVAL_QUEUE"
    exit 0
  fi
  export -f eval_run_one
  local rc=0
  # xargs -d '\n' keeps a line whole; the inner read splits it at the tabs.
  # shellcheck disable=SC2016
  xargs -d '\n' -P "$EVAL_JOBS" -I{} bash -c \
      'IFS=$'"'\t'"' read -ra f <<< "$1"; eval_run_one "${f[@]}"' _ {} < "$EVAL_QUEUE" || rc=1
  return $rc
}

eval_table() { /usr/bin/python3 scripts/eval_table.py "$@"; }

# The policies a scenario file lists (`policies: [a, b]`), comma-separated; "crux" if none.
eval_scenario_policies() {
  /usr/bin/python3 -c 'import sys, re
t = open(sys.argv[1]).read()
m = re.search(r"policies:\s*\[([^\]]*)\]", t)
print(",".join(p.strip() for p in m.group(1).split(",")) if m else "crux")' "$1"
}

# Queues one run per scenario and policy under PREFIX<scenario name>/<policy>:
#   eval_add_scenarios PREFIX POLICIES EXTRA SCENARIO.yaml...
# POLICIES is a comma-separated list ("" = each scenario's own), EXTRA the crux-sim options every
# run gets (split at spaces).
eval_add_scenarios() {
  local prefix=$1 policies=$2 extra=$3
  shift 3
  local sc name list p ps
  for sc in "$@"; do
    name=$(basename "$sc" .yaml)
    list=${policies:-$(eval_scenario_policies "$sc")}
    IFS=, read -ra ps <<< "$list"
    for p in "${ps[@]}"; do
      # shellcheck disable=SC2086
      eval_add "$prefix$name/$p" run --scenario "$sc" --policy "$p" --no-plots --quiet $extra
    done
  done
}

#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang + ASan + UBSan) and runs each for a bounded time.
#
#   scripts/fuzz.sh [--seconds N] [--parallel P] [--build-dir DIR] [--ci] [--replay] [--seeds]
#                   [target...]
#
#   target       protocol_decode, topology_spec, ... (or fuzz_<name>); default: every target.
#   --seconds N  fuzz each target for N seconds (default 30; -max_total_time).
#   --parallel P run P targets at once (default 1).
#   --build-dir  default build/fuzz (build/fuzz-ci with --ci).
#   --replay     only replay the seed corpora (fuzz/corpus/<target>/, every checked-in
#                reproducer included) once; no fuzzing.
#   --ci         what ./test.sh runs: replay, then 8 s per target, 2 at a time, in build/fuzz-ci
#                compiled at -O0 (a third less build time; speed does not matter for 8 s).
#   --seeds      regenerate the generated protocol seeds (fuzz/corpus/protocol_*/seed_*.bin).
#
# New inputs found go to <build-dir>/corpus/<target>/ (kept between runs, never into the repo);
# crashes, leaks, timeouts and out-of-memory inputs to <build-dir>/artifacts/<target>/. Prints
# executions and executions/s per target and ends with "fuzz: N passed, M failed". Exit status:
# 0 when every target ran clean, 1 when one found something, 2 on bad usage. Without clang's
# libFuzzer (Debian: clang, libclang-rt-14-dev; scripts/deps.sh installs them) it says so and
# exits 0 without fuzzing ("fuzz: SKIPPED ...").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

seconds=30
parallel=1
build_dir=
opt=-O1
replay_only=0
ci=0
seeds=0
targets=()
while (($# > 0)); do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    --parallel) parallel=${2:?--parallel needs a value}; shift 2 ;;
    --build-dir) build_dir=${2:?--build-dir needs a value}; shift 2 ;;
    --replay) replay_only=1; shift ;;
    --ci) ci=1; seconds=8; parallel=2; opt=-O0; shift ;;
    --seeds) seeds=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("${1#fuzz_}"); shift ;;
  esac
done
if [[ -z $build_dir ]]; then
  if ((ci)); then build_dir=build/fuzz-ci; else build_dir=build/fuzz; fi
fi
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz: --seconds must be a number" >&2; exit 2; }
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --parallel must be >= 1" >&2; exit 2; }

# clang with libFuzzer's runtime?
CXX_BIN=$(command -v clang++ || true)
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
probe='extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }'
if [[ -z $CXX_BIN ]] ||
    ! echo "$probe" | "$CXX_BIN" -x c++ -fsanitize=fuzzer,address,undefined - \
        -o "$probe_dir/probe" 2>"$probe_dir/err"; then
  why=${CXX_BIN:+$(head -1 "$probe_dir/err")}
  echo "fuzz: no clang++ with libFuzzer (-fsanitize=fuzzer); install the Debian packages clang" \
       "and libclang-rt-14-dev (scripts/deps.sh does). ${why}" >&2
  echo "fuzz: SKIPPED (no libFuzzer)"
  exit 0
fi
C_BIN=$(command -v clang || echo clang)

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Cache hits across checkouts in other folders (CI clones anew each run).
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
fi
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$CXX_BIN" -DCMAKE_C_COMPILER="$C_BIN" "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
  -DCRUX_BUILD_FUZZERS=ON -DCRUX_BUILD_TESTS=OFF -DCRUX_BUILD_BENCHMARKS=OFF -DCRUX_WERROR=OFF \
  >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log" >&2; exit 1; }

all_targets=()
for d in fuzz/corpus/*/; do all_targets+=("$(basename "$d")"); done
if ((${#targets[@]} == 0)); then targets=("${all_targets[@]}"); fi
build_targets=()
for t in "${targets[@]}"; do
  [[ -d fuzz/corpus/$t ]] || { echo "fuzz: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
  build_targets+=("fuzz_$t")
done
((seeds)) && build_targets+=(crux_fuzz_seedgen)
start_build=$SECONDS
cmake --build "$build_dir" --target "${build_targets[@]}" -j "$(nproc)"
echo "fuzz: build took $((SECONDS - start_build)) s"

if ((seeds)); then
  for t in protocol_decode protocol_envelope; do
    rm -f "fuzz/corpus/$t"/seed_*.bin
    "$build_dir/fuzz/crux_fuzz_seedgen" "fuzz/corpus/$t"
  done
fi

# Runs one target; writes "<target> <status> <execs> <execs/s> <seconds>" to $build_dir/results.
run_target() {
  local t=$1 bin="$build_dir/fuzz/fuzz_$1" log="$build_dir/logs/$1.log"
  local work="$build_dir/corpus/$1" art="$build_dir/artifacts/$1/"
  mkdir -p "$work" "$art" "$(dirname "$log")"
  local dict=()
  [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="fuzz/dict/$t.dict")
  local common=(-rss_limit_mb=2560 -timeout=25 -artifact_prefix="$art" -print_final_stats=1)
  local status=ok t0=$SECONDS
  # Replay: every seed and reproducer once (what `ctest -L fuzz` does).
  if ! "$bin" "${common[@]}" -runs=0 "fuzz/corpus/$t" >"$log" 2>&1; then status=FAILED; fi
  if [[ $status == ok ]] && ((replay_only == 0 && seconds > 0)); then
    if ! "$bin" "${common[@]}" "${dict[@]}" -max_total_time="$seconds" "$work" "fuzz/corpus/$t" \
        >>"$log" 2>&1; then
      status=FAILED
    fi
  fi
  local execs rate
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 |
    grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' ||
    echo 0)
  echo "$t $status ${execs:-0} ${rate:-0} $((SECONDS - t0))" >>"$build_dir/results"
}

rm -f "$build_dir/results"
mode="fuzzing ${seconds} s per target"
((replay_only)) && mode="replaying the seed corpora"
echo "fuzz: ${#targets[@]} targets, $mode, $parallel at a time"
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if ((running >= parallel)); then wait -n || true; running=$((running - 1)); fi
done
wait || true

passed=0
failed=0
printf '%-20s %-7s %14s %10s %6s\n' target status executions exec/s secs
while read -r t status execs rate secs; do
  printf '%-20s %-7s %14s %10s %6s\n' "$t" "$status" "$execs" "$rate" "$secs"
  if [[ $status == ok ]]; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "fuzz: $t found a defect; log: $build_dir/logs/$t.log," \
         "inputs: $build_dir/artifacts/$t/" >&2
    grep -m5 -E 'ERROR: |SUMMARY: |runtime error|property violated|Test unit written' \
      "$build_dir/logs/$t.log" >&2 || true
  fi
done < <(sort "$build_dir/results")
echo "fuzz: $passed passed, $failed failed"
((failed == 0))

#!/usr/bin/env bash
# The ThreadSanitizer stage of ./test.sh (docs/concurrency.md): configures the tsan preset
# (clang, -fsanitize=thread, -O0 with line tables, lock annotations checked by -Wthread-safety as
# errors) in build/tsan, builds only the concurrent components' test binaries (proto, daemon,
# client library, switch adapters, and the cruxd / crux-switch-agent binaries their process tests
# start) without their single-threaded test sources (tests/CMakeLists.txt), and runs those tests
# (ctest labels proto, daemon, client_lib, switch_adapters) with TSAN_OPTIONS from the preset
# (suppressions: tests/tsan.supp). Every TSan report, also one from a cruxd or crux-switch-agent
# process a test started, is written to build/tsan/tsan-reports/ and printed at the end; any
# report fails the stage, as does any failing test.
#
#   scripts/tsan.sh [--repeat N] [-j J] [ctest arguments...]
#
#   --repeat N  run the tests N times (ctest --repeat until-fail:N), e.g. to hunt rare races.
#   -j J        parallel tests (default: nproc).
#
# Prints the time of each step (wall and CPU) and ends with "tsan: PASSED in N s" or
# "tsan: FAILED ...". Exit status: 0 when every test passed and no report was written, 1
# otherwise. Without clang's TSan runtime (Debian: clang, libclang-rt-14-dev; scripts/deps.sh
# installs them) it fails with that message.
set -euo pipefail
cd "$(dirname "$0")/.."

repeat=1
jobs=$(nproc)
extra=()
while (($# > 0)); do
  case "$1" in
    --repeat) repeat=${2:?--repeat needs a value}; shift 2 ;;
    -j) jobs=${2:?-j needs a value}; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done

start=$SECONDS
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
if ! echo 'int main() { return 0; }' |
    clang++ -x c++ -fsanitize=thread - -o "$probe_dir/probe" 2>"$probe_dir/err"; then
  echo "tsan: FAILED: clang++ cannot build with -fsanitize=thread ($(head -1 "$probe_dir/err"));" \
       "install the Debian packages clang and libclang-rt-14-dev (scripts/deps.sh does)" >&2
  exit 1
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1  # Cache hits across fresh CI checkouts.
fi
cmake --preset tsan "${launcher[@]}" >/dev/null
TIMEFORMAT="tsan: build took %0R s (CPU: %0U s user, %0S s system)"
build_ok=1
time cmake --build --preset tsan -j "$(nproc)" || build_ok=0
if ((build_ok == 0)); then
  echo "tsan: FAILED in $((SECONDS - start)) s: the build failed (errors above)"
  exit 1
fi

reports=build/tsan/tsan-reports  # TSAN_OPTIONS log_path (CMakePresets.json): report.<exe>.<pid>
mkdir -p "$reports"
rm -f "$reports"/report.*
status=0
TIMEFORMAT="tsan: tests took %0R s (CPU: %0U s user, %0S s system)"
time ctest --preset tsan -j "$jobs" --repeat "until-fail:$repeat" "${extra[@]}" || status=1
shopt -s nullglob
found=("$reports"/report.*)
if ((${#found[@]} > 0)); then
  status=1
  echo "tsan: ${#found[@]} process(es) wrote ThreadSanitizer reports (in $reports):"
  for f in "${found[@]}"; do
    echo "==== $f ($(grep -c '^WARNING: ThreadSanitizer' "$f") report(s); first 300 lines)"
    head -n 300 "$f"
  done
  echo "tsan: report summaries:"
  cat "${found[@]}" | grep '^SUMMARY: ThreadSanitizer' | sort | uniq -c | sort -rn || true
fi
if ((status == 0)); then
  echo "tsan: PASSED in $((SECONDS - start)) s"
else
  echo "tsan: FAILED in $((SECONDS - start)) s (failing tests and ThreadSanitizer reports above;" \
       "docs/concurrency.md)"
fi
exit "$status"

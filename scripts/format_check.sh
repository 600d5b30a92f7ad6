#!/usr/bin/env bash
# Fails if any project C++ source is not clang-format clean (.clang-format at the root).
# Usage: scripts/format_check.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.cc' '*.h' | grep -v '^build' || true)
if ((${#files[@]} == 0)); then exit 0; fi
if [[ ${1:-} == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  [[ -f $f ]] || continue
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "clang-format: these files need formatting (run scripts/format_check.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "clang-format: ${#files[@]} files clean"

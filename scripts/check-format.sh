#!/usr/bin/env bash
# Fails, listing the files, when a tracked C, C++ or CUDA file differs from
# what the repo's .clang-format makes of it (clang-format-19 from Debian;
# .clang-format-ignore names the generated files it skips). Run by ctest
# (format/clang-format); `scripts/check-format.sh --fix` formats them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
format=${CLANG_FORMAT:-clang-format-19}
command -v "$format" >/dev/null || {
  echo "error: $format not found (scripts/install-packages.sh installs it)" >&2
  exit 1
}
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h' '*.cuh')
if [[ ${1:-} == --fix ]]; then
  "$format" -i "${files[@]}"
  exit 0
fi
bad=$("$format" --dry-run "${files[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: warning' |
      cut -d: -f1 | sort -u || true)
if [[ -n $bad ]]; then
  echo "not formatted by .clang-format (scripts/check-format.sh --fix formats them):"
  echo "$bad"
  exit 1
fi
echo "${#files[@]} files formatted"

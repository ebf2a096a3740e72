#!/usr/bin/env bash
# Every C++/CUDA source in the repository is formatted as .clang-format says (clang-format 14,
# Debian's). Fails naming the files that are not; `scripts/check_format.sh --fix` formats them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The sources git tracks; outside a git checkout (a source tarball), every one under the tree but the
# build folders. Either way, none is a failure, not a pass.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find . -type d \( -name 'build*' -o -name '.git' \) -prune -o -type f \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||' | sort)
fi
[ ${#files[@]} -gt 0 ] || { echo "check_format: no C++/CUDA sources found under $root" >&2; exit 1; }
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) not formatted as .clang-format says (scripts/check_format.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check_format: ${#files[@]} C++/CUDA files formatted"

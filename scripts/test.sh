#!/usr/bin/env bash
# The test command: set-up (idempotent), build, every test suite (ctest), then every JSON file
# under networks/, profiles/ and plans/ against schemas/, every golden plan checked and
# reproduced byte for byte from its inputs, and the sanitizer and fuzzing runs.
# Usage: scripts/test.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
build=$(mkdir -p "$build" && cd "$build" && pwd)  # absolute: the golden plans are checked from $root
"$root/scripts/setup.sh" "$build"
start=$(date +%s)
(cd "$build" && ctest --output-on-failure -j "$(nproc)")
python3 "$root/scripts/check_deps.py"
"$root/scripts/check_format.sh"
python3 "$root/scripts/validate_json.py"
shopt -s nullglob
plans=("$root"/plans/*.json)
if [ ${#plans[@]} -gt 0 ]; then
  # One plan a process, on every core, the largest files (the longest compiles) first.
  (cd "$root" && ls -S "${plans[@]#$root/}" | xargs -P "$(nproc)" -n 1 "$build/bin/ucplan" check --recompile)
fi
# Golden plans made from a measured CPU profile replay on the CPU backend with --check.
for plan in "$root"/plans/*-cpu-*.json; do
  [ -f "$plan" ] || continue
  "$build/bin/ucplan" run "$plan" --check --iterations 1 | grep -E "check|iteration"
done
# The adversary (issue 12): the test suite under ASan + UBSan, then a short seeded run of the plan
# mutator and of libFuzzer on each loader, in a clang build of its own (UCPLAN_SKIP_SANITIZE=1 skips).
if [ "${UCPLAN_SKIP_SANITIZE:-0}" != 1 ]; then
  "$root/scripts/sanitize.sh" "$root/build-fuzz"
  "$root/scripts/fuzz.sh" --quick "$root/build-fuzz"
fi
echo "test: all passed in $(( $(date +%s) - start )) s"

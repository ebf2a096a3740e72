#!/usr/bin/env bash
# The test command: set-up (idempotent), build, every test suite (ctest), then every JSON file
# under networks/, profiles/ and plans/ against schemas/, and every golden plan checked and
# reproduced byte for byte from its inputs.
# Usage: scripts/test.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
"$root/scripts/setup.sh" "$build"
start=$(date +%s)
(cd "$build" && ctest --output-on-failure -j "$(nproc)")
python3 "$root/scripts/check_deps.py"
python3 "$root/scripts/validate_json.py"
shopt -s nullglob
plans=("$root"/plans/*.json)
if [ ${#plans[@]} -gt 0 ]; then
  (cd "$root" && "$build/bin/ucplan" check --recompile "${plans[@]#$root/}")
fi
# Golden plans made from a measured CPU profile replay on the CPU backend with --check.
for plan in "$root"/plans/*-cpu-*.json; do
  [ -f "$plan" ] || continue
  "$build/bin/ucplan" run "$plan" --check --iterations 1 | grep -E "check|iteration"
done
echo "test: all passed in $(( $(date +%s) - start )) s"

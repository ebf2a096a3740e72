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
python3 "$root/scripts/validate_json.py"
shopt -s nullglob
plans=("$root"/plans/*.json)
if [ ${#plans[@]} -gt 0 ]; then
  (cd "$root" && "$build/planner/ucplan" check --recompile "${plans[@]#$root/}")
fi
echo "test: all passed in $(( $(date +%s) - start )) s"

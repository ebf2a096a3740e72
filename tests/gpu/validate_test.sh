#!/usr/bin/env bash
# scripts/gpu-validate.sh where there is no GPU (every device hidden): it fails loudly (exit 1,
# report "FAILED", the kernel check failing with exit 3, the later steps not run, never a
# SKIP counted as a pass); and its dry run on the CPU goes through every non-GPU step and writes
# a report with the replays' numbers and the checks, without claiming a validation.
# Usage: validate_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -uo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
CUDA_VISIBLE_DEVICES= UCPLAN_BUILD_DIR=$build bash "$src/scripts/gpu-validate.sh" "$work/nogpu" > "$work/nogpu.txt" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: without a GPU gpu-validate.sh exited $rc, want 1"; cat "$work/nogpu.txt"; exit 1; }
grep -q "VALIDATION FAILED" "$work/nogpu.txt" || { echo "FAIL: no loud failure line"; exit 1; }
python3 - "$work/nogpu/report.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
steps = {s["name"]: s["status"] for s in r["steps"]}
assert r["passed"] is False and r["verdict"] == "FAILED", r["verdict"]
assert steps["gpu-check"] == "FAIL (exit 3)", steps["gpu-check"]
assert all(steps[s] == "NOT RUN" for s in ["profile", "compile", "cuda-check", "run-check-tight", "profile-modern",
                                           "cuda-check-modern", "run-check-modern"]), steps
print("ok: without a GPU:", steps)
PY
UCPLAN_VALIDATE_DEVICE=cpu UCPLAN_VALIDATE_SIZES=undivided UCPLAN_VALIDATE_REPEAT=1 UCPLAN_BUILD_DIR=$build \
  bash "$src/scripts/gpu-validate.sh" "$work/dry" resnet20 8 > "$work/dry.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: the CPU dry run exited $rc"; tail -30 "$work/dry.txt"; exit 1; }
python3 - "$work/dry/report.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["passed"] is False and r["verdict"].startswith("DRY RUN"), r["verdict"]
steps = {s["name"]: s["status"] for s in r["steps"]}
assert all(steps[s] == "PASS" for s in ["profile", "compile", "run-keep-all", "run-tight", "run-check-keep-all", "run-check-tight",
                                       "profile-modern", "compile-modern", "run-check-modern"]), steps
for k in ["run-keep-all", "run-tight"]:
    assert r["runs"][k]["measured_over_predicted"] > 0, r["runs"]
assert r["runs"]["run-tight"]["arena_bytes"] < r["runs"]["run-keep-all"]["arena_bytes"], r["runs"]
assert all(v.startswith("check       PASSED") for v in r["checks"].values()), r["checks"]
print("ok: dry run:", steps)
PY
grep -q "^# ucplan GPU validation: DRY RUN" "$work/dry/report.md" || { echo "FAIL: report.md"; exit 1; }

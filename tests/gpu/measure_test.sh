#!/usr/bin/env bash
# scripts/gpu-measure.sh's dry run on the CPU (UCPLAN_MEASURE_DEVICE=cpu): every step a GPU session
# runs, PyTorch aside, on a small network at budgets where the plans copy: the measured profile, the
# plans and their runs, then the tightest copying plan traced, the profile calibrated to its copies
# and launch gap (ucplan calibrate) and every share compiled from the calibrated profile and run again.
# Usage: measure_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -uo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
UCPLAN_MEASURE_DEVICE=cpu UCPLAN_MEASURE_SIZES=undivided UCPLAN_MEASURE_REPEAT=1 UCPLAN_MEASURE_ITERATIONS=2 UCPLAN_MEASURE_SOLVER=fast UCPLAN_MEASURE_TORCH=0 \
  UCPLAN_BUILD_DIR=$build bash "$src/scripts/gpu-measure.sh" "$work/out" resnet20:8:45,30 > "$work/measure.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: the CPU dry run exited $rc"; tail -30 "$work/out/log.txt"; exit 1; }
python3 - "$work/out" <<'PY' || { tail -40 "$work/out/log.txt"; exit 1; }
import json, os, sys
out = sys.argv[1]
def load(name):
    return json.load(open(os.path.join(out, name)))
profile = load("profile-resnet20-b8.json")
assert profile["source"] == "measured", profile["source"]
copying = []
for share in (45, 30):
    run = load(f"run-resnet20-b8-{share}.json")
    assert run["median_seconds"] > 0, run
    if run["bytes_d2h"] > 0:
        copying.append(share)
assert copying, "no plan copies at 45 or 30 % of the peak: nothing to calibrate"
trace = load(f"trace-resnet20-b8-{copying[-1]}.json")
assert trace["otherData"]["timeline"] == "measured"
cal = load("profile-resnet20-b8-calibrated.json")
for d in ("h2d", "d2h"):
    c = cal["transfer"][d]["calibration"]
    assert c["traces"] == 1 and c["copies"] >= 2, c
    assert c["bench_bytes_per_second"] == profile["transfer"][d]["bytes_per_second"], (c, profile["transfer"][d])
gap = cal["launch_gap"]  # the default fit refits the launch gap too
assert gap["traces"] == 1 and gap["gaps"] >= 16 and 0 <= gap["seconds"] <= 1e-3, gap
assert {k: v for k, v in cal.items() if k not in ("transfer", "launch_gap")} == \
    {k: v for k, v in profile.items() if k != "transfer"}
for share in (45, 30):
    run = load(f"run-resnet20-b8-{share}-calibrated.json")
    assert run["median_seconds"] > 0, run
    plan = load(f"plan-resnet20-b8-{share}-calibrated.json")
    assert plan["options"]["budget_bytes"] > 0
print(f"ok: profiled, planned and ran at 45 and 30 %; plans copy at {copying} %; calibrated from the "
      f"{copying[-1]} % plan's trace and ran both shares again")
PY

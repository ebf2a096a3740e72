#!/usr/bin/env bash
# The budget is the device memory given: `ucplan compile` keeps a measured CUDA profile's
# device_overhead_bytes (CUDA context, cuDNN, cuBLAS) out of it, or what --reserve says.
# Usage: reserve.sh UCPLAN SOURCE_DIR WORK_DIR [exact]
#   exact: only the check that exact mode's --time-limit holds across a plan made again (a test of
#   its own: its compiles take minutes at sanitizer speed, and it asserts a time)
set -euo pipefail
ucplan=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
# A modelled profile with an overhead of 2 MiB, as a measured CUDA profile would record it.
python3 - "$src/profiles/model/resnet20-b64-k40.json" "$work/profile.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["device"]["versions"]["device_overhead_bytes"] = str(2 << 20)
json.dump(p, open(sys.argv[2], "w"), indent=1)
PY
budget_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['options']['budget_bytes'])" "$1"; }
measured="$src/profiles/h100/resnet20-b64.json"
if [ "${4:-}" = exact ]; then
  # Exact mode's --time-limit is the compile's: at 142.5 MiB the plan is made again (its pinned
  # host buffers' mapping does not fit beside it), and that second MILP gets what the first left
  # (at least a second), not the whole limit once more.
  "$ucplan" compile resnet20 --profile "$measured" --budget 142.5MiB --solver exact --time-limit 3s -o "$work/exact.json" |
    tee "$work/exact.txt"
  [ "$(budget_of "$work/exact.json")" -lt $(( (285 << 19) - $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device']['versions']['device_overhead_bytes'])" "$measured") )) ] ||
    { echo "FAIL: the exact plan at 142.5 MiB was not made again: the case is not exercised"; exit 1; }
  python3 - "$work/exact.txt" <<'PY'
import re, sys
m = re.search(r"exact mode +sub-batch \d+: MILP .* in ([\d.]+) (s|ms) ", open(sys.argv[1]).read())
assert m, "no exact-mode line in the report"
seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
# The first MILP takes the 3 s (it is not proven optimal in them); the second gets a second, and a
# second of grace: the whole limit again (3-4 s) is the old behaviour.
assert seconds <= 2.5, f"the plan made again ran its MILP for {seconds} s under a 3 s limit for the compile"
PY
  # A MILP stopped at the limit: the plan says it may not reproduce, and `check --recompile` says
  # why when an exact plan under a limit does not (here forced, on a three-layer network whose
  # MILPs take milliseconds: a note edited, which the verifier does not look at).
  grep -q "may not be reproduced byte for byte" "$work/exact.json" ||
    { echo "FAIL: the plan does not say that a MILP stopped at --time-limit makes it irreproducible"; exit 1; }
  "$ucplan" compile "$src/tests/error/inputs/chain3bn.json" --profile "$src/tests/error/inputs/chain3bn-b4-k40.json" \
    --budget 1MiB --solver exact --time-limit 10s -q -o "$work/small.json"
  sed 's/times are predicted from a modelled profile/times predicted from a modelled profile/' "$work/small.json" \
    > "$work/edited.json"
  cmp -s "$work/small.json" "$work/edited.json" && { echo "FAIL: the plan has no note to edit"; exit 1; }
  set +e
  out=$("$ucplan" check --recompile "$work/edited.json" 2>&1); rc=$?
  set -e
  [ "$rc" -eq 1 ] && grep -q "made by exact mode under --time-limit" <<<"$out" ||
    { echo "FAIL: check --recompile of an exact plan under a time limit: rc $rc: $out"; exit 1; }
  echo "ok: exact mode's time limit is the compile's"
  exit 0
fi
# The reserve's arithmetic does not depend on how hard the search looks: one search branch
# (a resnet20 compile in about a second rather than four).
fast="--solver fast"
"$ucplan" compile resnet20 --profile "$work/profile.json" --budget 24MiB $fast -o "$work/auto.json" | tee "$work/auto.txt"
grep -q "reserve       2.00 MiB of the 24.0 MiB budget" "$work/auto.txt"
[ "$(budget_of "$work/auto.json")" -eq $(( (24 - 2) << 20 )) ] || { echo "FAIL: auto reserve: budget $(budget_of "$work/auto.json")"; exit 1; }
"$ucplan" compile resnet20 --profile "$work/profile.json" --budget 24MiB $fast --reserve 0MiB -o "$work/none.json" >/dev/null
[ "$(budget_of "$work/none.json")" -eq $(( 24 << 20 )) ] || { echo "FAIL: --reserve 0: budget $(budget_of "$work/none.json")"; exit 1; }
"$ucplan" compile resnet20 --profile "$work/profile.json" --budget 24MiB $fast --reserve 4MiB -o "$work/four.json" >/dev/null
[ "$(budget_of "$work/four.json")" -eq $(( 20 << 20 )) ] || { echo "FAIL: --reserve 4MiB: budget $(budget_of "$work/four.json")"; exit 1; }
# --budget device: the whole memory of the profile's device (the K40 model's 12 GiB), less the reserve.
"$ucplan" compile resnet20 --profile "$work/profile.json" --budget device $fast -o "$work/device.json" | tee "$work/device.txt"
grep -q "budget        --budget device: the memory of the profile's device, model k40 .*: 12.0 GiB" "$work/device.txt"
[ "$(budget_of "$work/device.json")" -eq $(( (12 << 30) - (2 << 20) )) ] || { echo "FAIL: --budget device: budget $(budget_of "$work/device.json")"; exit 1; }
# A profile without the field (CPU, models): nothing reserved.
"$ucplan" compile resnet20 --profile "$src/profiles/model/resnet20-b64-k40.json" --budget 24MiB $fast -o "$work/model.json" >/dev/null
[ "$(budget_of "$work/model.json")" -eq $(( 24 << 20 )) ] || { echo "FAIL: model profile: budget $(budget_of "$work/model.json")"; exit 1; }
# A measured CUDA profile: the GPU maps every 4 KiB page of pinned host memory (8 bytes a page),
# so the arena and that mapping together stay within the budget less the reserve. At 138 MiB the
# first plan for resnet20 b64 leaves less than its host buffers' mapping, so it is made again
# (with the default search: one search branch's plan leaves room for the mapping there).
"$ucplan" compile resnet20 --profile "$measured" --budget 138MiB -o "$work/measured.json" | tee "$work/measured.txt"
grep -q "for the GPU's mapping of the plan's pinned host buffers" "$work/measured.txt"
"$ucplan" check "$work/measured.json" >/dev/null
python3 - "$measured" "$work/measured.json" $(( 138 << 20 )) <<'PY'
import json, sys
profile, plan, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
room = budget - int(profile["device"]["versions"]["device_overhead_bytes"])
host = sum(h["size"] for h in plan.get("host_buffers", []))
used = plan["arena_bytes"] + (host + 511) // 512
assert host > 0, "the plan has no host buffers: the case is not exercised"
assert plan["options"]["budget_bytes"] < room, f"not made again: plan budget {plan['options']['budget_bytes']} of {room}"
assert used <= room, f"arena {plan['arena_bytes']} + mapping of {host} host bytes = {used} > {room}"
PY
set +e
out=$("$ucplan" compile resnet20 --profile "$work/profile.json" --budget 2MiB $fast -o "$work/x.json" 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "leaves nothing for the plan" <<<"$out" || { echo "FAIL: budget <= reserve: rc $rc: $out"; exit 1; }
# --budget N%: that share of the liveness peak `ucplan inspect` reports at the batch goes to the
# plan's arena, the reserve on top; the plan is the one the same bytes give.
peak=$("$ucplan" inspect resnet20 --batch 64 --json | python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['liveness_peak_bytes'])")
"$ucplan" compile resnet20 --profile "$work/profile.json" --budget 37.5% $fast -o "$work/share.json" | tee "$work/share.txt"
[ "$(budget_of "$work/share.json")" -eq $(( peak * 375 / 1000 )) ] ||
  { echo "FAIL: --budget 37.5% of $peak: plan budget $(budget_of "$work/share.json")"; exit 1; }
grep -q "budget        --budget 37.5%: 37.5 % of the liveness peak" "$work/share.txt"
"$ucplan" compile resnet20 --profile "$work/profile.json" --budget $(( peak * 375 / 1000 + (2 << 20) ))B $fast \
  -o "$work/share-bytes.json" >/dev/null
cmp "$work/share.json" "$work/share-bytes.json" || { echo "FAIL: --budget 37.5% and its bytes give different plans"; exit 1; }
for bad in "%" "0%" "x%" "35%%" "1e400%" "nan%" "0.0000001%"; do
  set +e
  out=$("$ucplan" compile resnet20 --profile "$work/profile.json" --budget "$bad" $fast -o "$work/x.json" 2>&1); rc=$?
  set -e
  [ "$rc" -eq 2 ] && grep -q "^ucplan: error: --budget: " <<<"$out" && [ ! -e "$work/x.json" ] ||
    { echo "FAIL: --budget $bad: rc $rc: $out"; exit 1; }
done
echo "ok: reserve kept out of the budget"

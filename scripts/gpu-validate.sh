#!/usr/bin/env bash
# One-call validation of ucplan on a GPU machine (< 10 min on an H100), from a checkout with a
# CUDA build (build/bin) or from a bundle made by scripts/gpu-bundle.sh (its env.sh finds cuDNN
# and cuBLAS). Steps, each logged to OUT/logs/STEP.txt:
#   facts        nvidia-smi (name, UUID, driver, clocks, power limit, ECC, MIG)
#   gpu-check    ucplan-gpu-check --require-device: every CUDA kernel against the CPU reference
#   profile      ucplan profile NET --device cuda (measured; NVML facts and overhead inside)
#   compile      plans at keep-all and at a tight budget (a third of keep-all's peak, or a half,
#                + the profile's reserve for the CUDA context and libraries)
#   cuda-check   ucplan-cuda-check --require-device on both plans: CUDA replay vs CPU replay
#   run          ucplan run --device cuda on both plans (measured vs predicted)
#   run-check    ucplan run --device cuda --check on both plans (poisoned, vs the CPU reference)
#   *-modern     profile, compile, cuda-check and run-check again on a small network with every
#                layer type of today's CNNs (hardswish, SE mul, SiLU, layer norm, GELU, scale, slice,
#                clip, sigmoid, channel shuffle)
#   precisions   bf16 and fp16 (the network, the modern one, and a classic one also at fp32): profile
#                on the device, compile, ucplan-cuda-check; run --check on the network
# and writes OUT/report.md and OUT/report.json. A GPU is required (UCPLAN_REQUIRE_GPU=1): any
# step that fails or prints SKIP fails the validation, loudly, with exit code 1.
# Usage: scripts/gpu-validate.sh OUT [NETWORK (default resnet20)] [BATCH (default 64)]
# For tests of this script on a machine without a GPU: UCPLAN_VALIDATE_DEVICE=cpu runs the same
# profile/compile/run/report steps on the CPU (the GPU-only steps are left out and the verdict
# says "DRY RUN", never PASSED); UCPLAN_VALIDATE_SIZES (powerOfTwo) and UCPLAN_VALIDATE_REPEAT (5)
# shorten the profile.
set -uo pipefail
out=${1:?usage: scripts/gpu-validate.sh OUT [NETWORK] [BATCH]}
net=${2:-resnet20}
batch=${3:-64}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu-where.sh
source "$here/gpu-where.sh"
mode="$([ "$in_bundle" = 1 ] && echo bundle || echo checkout) $root"
export UCPLAN_REQUIRE_GPU=1
device=${UCPLAN_VALIDATE_DEVICE:-cuda}
sizes=${UCPLAN_VALIDATE_SIZES:-powerOfTwo}
repeat=${UCPLAN_VALIDATE_REPEAT:-5}
dry=0
[ "$device" = cuda ] || dry=1
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
start=$(date +%s)
steps=()      # "name|status|seconds|summary"
failed=0
stop=0

# step NAME TIMEOUT_S COMMAND...: runs it (unless an earlier step said the device is unusable),
# logs its output, fails on a non-zero exit or a SKIP in its output.
step() {
  local name=$1 limit=$2; shift 2
  local log="$out/logs/$name.txt" t0 rc status summary
  if [ "$stop" = 1 ]; then
    steps+=("$name|NOT RUN|0|no usable GPU (see gpu-check)")
    failed=1
    return 1
  fi
  t0=$(date +%s)
  echo "== $name: $*" | tee "$log"
  if declare -F "$1" >/dev/null; then  # a function of this script, in a shell of its own
    # Its arguments passed as arguments ("$@" there), so a path with a space stays one.
    timeout "$limit" bash -c "$(declare -f "$1"); \"\$@\"" bash "$@" >>"$log" 2>&1
  else
    timeout "$limit" "$@" >>"$log" 2>&1
  fi
  rc=$?
  status=PASS
  if [ "$rc" -ne 0 ]; then status="FAIL (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after ${limit} s"))"; fi
  if grep -q "SKIP" "$log"; then status="FAIL (printed SKIP)"; fi
  summary=$(grep -v "^== " "$log" | grep -E "FAIL|PASS|check |iteration |checks,|error|SKIP" | tail -3 | tr '\n' ' ' | cut -c1-300)
  steps+=("$name|$status|$(( $(date +%s) - t0 ))|$summary")
  if [ "$status" != PASS ]; then
    failed=1
    echo "!! $name: $status" >&2
    tail -5 "$log" >&2
    return 1
  fi
  return 0
}

facts() {
  command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found"; return 1; }
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit,ecc.mode.current,mig.mode.current,temperature.gpu \
    --format=csv
  nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1 || true
}

gpu_step() {  # a step that only means something on a GPU: left out of a dry run
  if [ "$dry" = 1 ]; then steps+=("$1|DRY RUN: left out|0|needs a GPU"); return 0; fi
  step "$@"
}
export bin net batch out  # the functions run in shells of their own (step)
gpu_step facts 60 facts
if ! gpu_step gpu-check 300 "$bin/ucplan-gpu-check" --require-device; then
  grep -qE "no driver|no device|driver too old" "$out/logs/gpu-check.txt" && stop=1
fi
export profile=$out/profile-$net-b$batch.json
step profile 300 "$bin/ucplan" profile "$net" --batch "$batch" --device "$device" --sizes "$sizes" --repeat "$repeat" -o "$profile"
export keep=$out/plan-$net-b$batch-keep-all.json
export tight=$out/plan-$net-b$batch-tight.json
compile_both() {  # [NETWORK PROFILE KEEP TIGHT]: the validated network's by default
  local net=${1:-$net} profile=${2:-$profile} keep=${3:-$keep} tight=${4:-$tight}
  "$bin/ucplan" compile "$net" --profile "$profile" --budget 64GiB --strategy keep-all -o "$keep" || return 1
  # A third of keep-all's peak for the arena, plus what the profile reserves for the runtime.
  local peak reserve budget
  peak=$(env -u LD_LIBRARY_PATH python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['peak_bytes'])" "$keep") || return 1
  reserve=$(env -u LD_LIBRARY_PATH python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device']['versions'].get('device_overhead_bytes', 0))" "$profile") || return 1
  local divisor
  for divisor in 3 2; do  # a half when a third is below what this network can do
    budget=$(( (peak / divisor + reserve) / 1048576 + 1 ))
    echo "keep-all peak $peak bytes, reserve $reserve bytes: tight budget ${budget}MiB (1/$divisor of the peak)"
    "$bin/ucplan" compile "$net" --profile "$profile" --budget "${budget}MiB" -o "$tight" && return 0
  done
  return 1
}
step compile 120 compile_both
gpu_step cuda-check 300 "$bin/ucplan-cuda-check" --require-device "$keep" "$tight"
step run-keep-all 120 "$bin/ucplan" run "$keep" --device "$device" --iterations 5 --json
step run-tight 120 "$bin/ucplan" run "$tight" --device "$device" --iterations 5 --json
step run-check-keep-all 120 "$bin/ucplan" run "$keep" --device "$device" --check --iterations 1
step run-check-tight 120 "$bin/ucplan" run "$tight" --device "$device" --check --iterations 1
# Today's layer types (MobileNetV3's, EfficientNet's, ConvNeXt's, ShuffleNet's: the kernels of
# executor/cuda/modern_kernels.cu) in the small network of profiler/check_networks.h (the kernel
# check prints it): profiled, compiled at keep-all and tight, replayed CUDA vs CPU and checked
# against the reference.
export modern=$out/modern.json
export mprofile=$out/profile-modern-b16.json mkeep=$out/plan-modern-b16-keep-all.json mtight=$out/plan-modern-b16-tight.json
"$bin/ucplan-gpu-check" --print-network modern > "$modern"
step profile-modern 300 "$bin/ucplan" profile "$modern" --batch 16 --device "$device" --sizes "$sizes" --repeat "$repeat" -o "$mprofile"
step compile-modern 120 compile_both "$modern" "$mprofile" "$mkeep" "$mtight"
gpu_step cuda-check-modern 300 "$bin/ucplan-cuda-check" --require-device "$mkeep" "$mtight"
step run-check-modern 120 "$bin/ucplan" run "$mtight" --device "$device" --check --iterations 1
# Precisions (issue 15): bf16 and fp16 profiles measured on the device, plans replayed there against
# the CPU's exact emulation: the validated network, and the modern and classic networks of
# profiler/check_networks.h (the classic one also at fp32, which no other step replays: LRN,
# ceil-mode pooling, dropout), so that ucplan-cuda-check replays every kernel of executor/cuda,
# templated on the storage type, at fp32, bf16 and fp16.
export classic=$out/classic.json
"$bin/ucplan-gpu-check" --print-network classic > "$classic"
export precision_device=$device
compile_precisions() {
  one() {  # NAME NETWORK BATCH PRECISION: profile on the device, compile plan-NAME-bBATCH-PRECISION.json
    "$bin/ucplan" profile "$2" --batch "$3" --device "$precision_device" --sizes undivided --repeat 1 --precision "$4" \
      -o "$out/profile-$1-b$3-$4.json" &&
      "$bin/ucplan" compile "$2" --profile "$out/profile-$1-b$3-$4.json" --precision "$4" --budget 64GiB \
        -o "$out/plan-$1-b$3-$4.json"
  }
  local p
  for p in bf16 fp16; do
    one "$net" "$net" "$batch" "$p" && one modern "$modern" 16 "$p" && one classic "$classic" 16 "$p" || return 1
  done
  one classic "$classic" 16 fp32
}
step compile-precisions 240 compile_precisions
precision_plans=()
for p in bf16 fp16; do precision_plans+=("$out/plan-$net-b$batch-$p.json" "$out/plan-modern-b16-$p.json"); done
precision_plans+=("$out/plan-classic-b16-fp32.json" "$out/plan-classic-b16-bf16.json" "$out/plan-classic-b16-fp16.json")
gpu_step cuda-check-precisions 420 "$bin/ucplan-cuda-check" --require-device "${precision_plans[@]}"
step run-check-bf16 120 "$bin/ucplan" run "$out/plan-$net-b$batch-bf16.json" --device "$device" --check --iterations 1
step run-check-fp16 120 "$bin/ucplan" run "$out/plan-$net-b$batch-fp16.json" --device "$device" --check --iterations 1
total=$(( $(date +%s) - start ))

# The report: markdown for people, JSON for programs.
verdict=PASSED
[ "$dry" = 1 ] && verdict="DRY RUN on $device (not a validation)"
[ "$failed" = 1 ] && verdict=FAILED
env -u LD_LIBRARY_PATH python3 - "$out" "$verdict" "$total" "$mode" "$net" "$batch" "${steps[@]}" <<'PY'
import glob, json, os, re, sys
out, verdict, total, mode, net, batch = sys.argv[1:7]
steps = [dict(zip(["name", "status", "seconds", "summary"], s.split("|", 3))) for s in sys.argv[7:]]
for s in steps:
    s["seconds"] = int(s["seconds"])
report = {"verdict": verdict, "passed": verdict == "PASSED", "seconds": int(total), "mode": mode, "network": net,
          "batch": int(batch), "steps": steps}
prof = glob.glob(os.path.join(out, "profile-*.json"))
if prof:
    try:
        p = json.load(open(prof[0]))
        report["device"] = {"name": p["device"]["name"], "memory_bytes": p["device"].get("memory_bytes"), **p["device"].get("versions", {})}
    except Exception as e:
        report["device"] = {"error": str(e)}
runs = {}
for name in ["run-keep-all", "run-tight"]:
    log = os.path.join(out, "logs", name + ".txt")
    if os.path.exists(log):
        text = open(log).read()
        m = text.find("{")
        try:
            r = json.loads(text[m:text.rfind("}") + 1]) if m >= 0 else None
        except ValueError:
            r = None
        if r:
            runs[name] = {k: r.get(k) for k in ["median_seconds", "predicted_seconds", "measured_over_predicted", "arena_bytes",
                                                 "device_memory_bytes", "runtime_overhead_bytes", "budget_bytes", "notes"]}
report["runs"] = runs
checks = {}
for name in ["run-check-keep-all", "run-check-tight"]:
    log = os.path.join(out, "logs", name + ".txt")
    if os.path.exists(log):
        m = re.search(r"check\s+(PASSED|FAILED).*", open(log).read())
        checks[name] = m.group(0).strip() if m else "no check line"
report["checks"] = checks
json.dump(report, open(os.path.join(out, "report.json"), "w"), indent=1)
md = [f"# ucplan GPU validation: {verdict}", "",
      f"{net} batch {batch}, {mode}, {total} s in all.", ""]
if "device" in report:
    d = report["device"]
    md += ["## Device", ""] + [f"- {k}: {v}" for k, v in d.items()] + [""]
md += ["## Steps", "", "| step | status | time | summary |", "|---|---|---|---|"]
md += [f"| {s['name']} | {s['status']} | {s['seconds']} s | {s['summary'].replace('|', '/')} |" for s in steps]
if runs:
    md += ["", "## Replays (ucplan run --device cuda)", "", "| plan | measured | predicted | ratio | arena | runtime overhead | notes |",
           "|---|---|---|---|---|---|---|"]
    for k, r in runs.items():
        ms = lambda v: f"{v * 1e3:.2f} ms" if isinstance(v, (int, float)) else "-"
        mib = lambda v: f"{v / 2**20:.1f} MiB" if isinstance(v, (int, float)) else "-"
        md.append(f"| {k} | {ms(r['median_seconds'])} | {ms(r['predicted_seconds'])} | {r['measured_over_predicted']:.2f} | "
                  f"{mib(r['arena_bytes'])} | {mib(r['runtime_overhead_bytes'])} | {len(r['notes'] or [])} substitution(s) |")
if checks:
    md += ["", "## Checks (ucplan run --device cuda --check)", ""] + [f"- {k}: {v}" for k, v in checks.items()]
md += ["", "Logs: logs/*.txt; nvidia-smi -q: nvidia-smi-q.txt; the profile and plans beside this report.", ""]
open(os.path.join(out, "report.md"), "w").write("\n".join(md))
PY
echo
cat "$out/report.md"
if [ "$failed" = 1 ]; then
  echo "VALIDATION FAILED (see $out/report.md and $out/logs/)" >&2
  exit 1
fi
echo "$verdict in $total s"

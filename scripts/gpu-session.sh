#!/usr/bin/env bash
# A GPU session's measurements in one device call, from a bundle (scripts/gpu-bundle.sh) or a
# checkout with a CUDA build. Every step runs under one deadline, and OUT/session.tgz is written
# again after each step, so a call cut off at its time limit still brings back what it finished.
# Steps, most needed first:
#   golden    the golden plans compiled from measured profiles (plans/*measured*.json), replayed:
#             ucplan run --device cuda --iterations 20 --json (measured vs predicted, device memory)
#   validate  scripts/gpu-validate.sh resnet20 64: every CUDA kernel, CUDA replay vs CPU, precisions
#   quality   the default compiled there from the measured ResNet-50 b64 H100 profile and from its
#             calibrated copy (ucplan calibrate) at 85 / 70 / 50 / 35 / 25 % of the liveness peak
#             (--reserve 0B, as benchmarks/gpu_results.py parts F, H and J), replayed side by side
#             (scripts/gpu-plan-quality.sh run: 20 iterations, two rounds, the second reversed)
#   measure   scripts/gpu-measure.sh resnet50:64:25 without PyTorch: a new measured profile, the
#             plan at 25 %, its trace, the profile calibrated to it, the plan again, both replayed
#   launch    (only when asked) the launch gap (ucplan calibrate --fit launch) against the device:
#             resnet20 b64 keep-all from profiles/h100/resnet20-b64.json traced, the profile
#             calibrated to the trace's launch gap (launch/calibrate.txt), then keep-all and the
#             default at 35 % of the liveness peak (--reserve 0B) compiled there from both profiles
#             and replayed side by side (scripts/gpu-plan-quality.sh run): gpu_results.py part N's
#             predictions, measured
#   graphs    (only when asked) CUDA graphs beside one launch per step: resnet20 b64 keep-all from
#             profiles/h100/resnet20-b64.json and the golden plans from measured profiles, replayed with
#             --no-cuda-graphs and --cuda-graphs alternately (20 iterations, rounds a and b, b in reverse
#             order), and a trace of each with graphs: what benchmarks/gpu_h200.py part E measured on an
#             H200 (graphs faster on chains of short kernels, slower on plans that wait on many copies)
#   check     (only when asked) the default at 25 % from the measured ResNet-50 b64 profile
#             (--reserve 0B), then `ucplan run --device cuda --check --iterations 1`, its progress
#             lines in check.log: 103 s on an H100's 16-core host (sixth session), nearly all of it
#             the CPU references
# OUT/session/steps.txt has one line per step: name, exit status (non-zero when any of its commands
# failed), seconds; or name, skipped, 0 for measure without the minute it needs. nvidia-smi before
# and after.
# First run on a GPU (an H100, 2026-11-27, the fifth session, SECONDS 545): golden 14 s, validate
# 193 s, quality 297 s (ten compiles and twenty replays), 504 s in all, so measure, which needs the
# last 60 s and more, did not run. The four steps need about 650 s: more than one device call's
# 600 s, so measure goes in a call of its own (UCPLAN_SESSION_STEPS=measure) when a session has the
# time.
# Usage: scripts/gpu-session.sh OUT [SECONDS (default 540)]
#   UCPLAN_SESSION_STEPS: the steps to run, in this order (default "golden validate quality measure";
#   the sixth session's second call would be "measure check")
#   UCPLAN_SESSION_DEVICE=cpu: a dry run of the plumbing on the CPU (the GPU steps fail, and
#   validate runs its own dry run), for the script's own test (tests/gpu/session_test.sh).
set -uo pipefail
out=${1:?usage: scripts/gpu-session.sh OUT [SECONDS]}
seconds=${2:-540}
t_end=$(($(date +%s) + seconds))
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/gpu-where.sh
source "$here/gpu-where.sh"
if [ "$in_bundle" = 1 ]; then
  measured=$root/profiles/resnet50-b64-h100.json
  calibrated=$root/profiles/resnet50-b64-h100-calibrated.json
  r20=$root/profiles/resnet20-b64-h100.json
else
  measured=$root/benchmarks/results/gpu-h100/plan-quality/profile-resnet50-b64.json
  calibrated=$root/profiles/h100/calibrated/resnet50-b64.json
  r20=$root/profiles/h100/resnet20-b64.json
fi
device=${UCPLAN_SESSION_DEVICE:-cuda}
steps=" ${UCPLAN_SESSION_STEPS:-golden validate quality measure} "
for w in $steps; do
  case "$w" in
    golden | validate | quality | measure | launch | graphs | check) ;;
    *) echo "gpu-session: unknown step \"$w\" in UCPLAN_SESSION_STEPS (golden, validate, quality, measure, launch, graphs, check)" >&2; exit 2 ;;
  esac
done
wanted() { [[ "$steps" == *" $1 "* ]]; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
s=$out/session
rm -rf "$s"
mkdir -p "$s"
left() { echo $((t_end - $(date +%s))); }
cap() {  # CAP: seconds a step may take, CAP or what the deadline leaves (8 s kept for packing)
  local l=$(($(left) - 8))
  [ "$l" -lt "$1" ] && echo "$((l > 1 ? l : 1))" || echo "$1"
}
pack() {
  tar czf "$out/session.tgz.part" -C "$out" session && mv "$out/session.tgz.part" "$out/session.tgz"
}
step() {  # NAME COMMAND...: run, logged to session/NAME.log; its line in steps.txt; packed
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  "$@" >"$s/$name.log" 2>&1
  rc=$?
  echo "$name $rc $(($(date +%s) - t0))" >>"$s/steps.txt"
  echo "gpu-session: $name: exit $rc in $(($(date +%s) - t0)) s, $(left) s left"
  pack
}
smi() { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; }

# Each step returns non-zero when any of its commands failed (its log says which), so that
# steps.txt says what worked; the session itself goes on to the next step.
golden() {
  local p failed=0
  mkdir -p "$s/golden"
  for p in "$root"/plans/*measured*.json; do
    [ -e "$p" ] || continue
    timeout "$(cap 60)" "$bin/ucplan" run "$p" --device "$device" --iterations 20 --json \
      >"$s/golden/run-$(basename "$p")" || { echo "golden: $p failed"; failed=1; }
  done
  return $failed
}
liveness_peak() {  # NET BATCH: the liveness peak in bytes (`ucplan inspect`)
  "$bin/ucplan" inspect "$1" --batch "$2" --json |
    env -u LD_LIBRARY_PATH python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['liveness_peak_bytes'])"
}
quality() {
  local net=resnet50 batch=64 peak share who prof failed=0
  mkdir -p "$s/quality/plans"
  peak=$(liveness_peak $net $batch) || return 1
  for share in 85 70 50 35 25; do
    for who in measured calibrated; do
      prof=$measured
      [ "$who" = calibrated ] && prof=$calibrated
      [ "$(left)" -gt 30 ] || return 1
      timeout "$(cap 60)" "$bin/ucplan" compile $net --batch $batch --profile "$prof" \
        --budget "$((peak * share / 100))B" --reserve 0B -q -o "$s/quality/plans/$who-$share.json" ||
        { echo "quality: $who at $share % did not compile"; failed=1; }
    done
  done
  timeout "$(cap 300)" bash "$root/scripts/gpu-plan-quality.sh" run "$s/quality/plans" "$s/quality" || failed=1
  return $failed
}

launch() {
  local peak who share budget how l=$s/launch failed=0
  mkdir -p "$l/plans"
  peak=$(liveness_peak resnet20 64) || return 1
  plan() {  # WHO SHARE: compiled from WHO's profile
    local prof=$r20
    [ "$1" = gapped ] && prof=$l/gapped-profile.json
    budget=$((peak * 35 / 100))B how=()
    [ "$2" = keep ] && budget=64GiB how=(--strategy keep-all)
    timeout "$(cap 60)" "$bin/ucplan" compile resnet20 --batch 64 --profile "$prof" --budget "$budget" \
      --reserve 0B "${how[@]}" -q -o "$l/plans/$1-$2.json" || { echo "launch: $1 $2 did not compile"; failed=1; }
  }
  plan profiled keep
  timeout "$(cap 30)" "$bin/ucplan" run "$l/plans/profiled-keep.json" --device "$device" --iterations 3 \
    --trace "$l/trace-profiled-keep.json" &&
    "$bin/ucplan" calibrate "$r20" -t "$l/trace-profiled-keep.json" --fit launch -o "$l/gapped-profile.json" \
      >"$l/calibrate.txt" 2>&1 || failed=1
  for who in profiled gapped; do
    for share in keep 35; do
      [ -e "$l/plans/$who-$share.json" ] || plan $who $share
    done
  done
  timeout "$(cap 120)" bash "$root/scripts/gpu-plan-quality.sh" run "$l/plans" "$l" || failed=1
  return $failed
}

graphs() {
  local g=$s/graphs r p flag flags b failed=0
  mkdir -p "$g"
  timeout "$(cap 60)" "$bin/ucplan" compile resnet20 --batch 64 --profile "$r20" --budget 64GiB --strategy keep-all \
    --reserve 0B -q -o "$g/r20-keep.json" || { echo "graphs: resnet20 keep-all did not compile"; failed=1; }
  for r in a b; do
    flags="--no-cuda-graphs --cuda-graphs"
    [ "$r" = b ] && flags="--cuda-graphs --no-cuda-graphs"
    for p in "$g/r20-keep.json" "$root"/plans/*measured*.json; do
      [ -e "$p" ] || continue
      b=$(basename "$p" .json)
      for flag in $flags; do
        [ "$(left)" -gt 5 ] || return 1
        timeout "$(cap 60)" "$bin/ucplan" run "$p" --device "$device" --iterations 20 --json "$flag" \
          >"$g/run-$b$flag-$r.json" || { echo "graphs: $b $flag failed"; failed=1; }
      done
    done
  done
  for p in "$g/r20-keep.json" "$root"/plans/*measured*.json; do
    [ -e "$p" ] && [ "$(left)" -gt 5 ] || continue
    timeout "$(cap 30)" "$bin/ucplan" run "$p" --device "$device" --iterations 3 --cuda-graphs \
      --trace "$g/trace-$(basename "$p" .json)-graphs.json" >/dev/null || { echo "graphs: tracing $p failed"; failed=1; }
  done
  return $failed
}

check() {
  local net=resnet50 batch=64 peak plan=$s/check-measured-25.json
  peak=$(liveness_peak $net $batch) || return 1
  timeout "$(cap 60)" "$bin/ucplan" compile $net --batch $batch --profile "$measured" --budget "$((peak * 25 / 100))B" \
    --reserve 0B -q -o "$plan" || return 1
  timeout "$(cap 240)" "$bin/ucplan" run "$plan" --device "$device" --check --iterations 1
}

smi >"$s/gpu-before.txt" 2>&1
date -u +%FT%TZ >"$s/date.txt"
(cat "$root/VERSION" 2>/dev/null || git -C "$root" rev-parse HEAD) >"$s/version.txt" 2>&1
wanted golden && step golden golden
wanted validate && step validate env UCPLAN_VALIDATE_DEVICE="$device" timeout "$(cap 300)" \
  bash "$root/scripts/gpu-validate.sh" "$s/validate" resnet20 64
wanted quality && step quality quality
if wanted measure && [ "$(left)" -le 60 ]; then
  echo "measure skipped 0" >>"$s/steps.txt"  # needs more than the last minute
  echo "gpu-session: measure: skipped, $(left) s left (it needs more than 60)"
fi
wanted measure && [ "$(left)" -gt 60 ] &&
  step measure env UCPLAN_MEASURE_TORCH=0 UCPLAN_MEASURE_DEVICE="$device" timeout "$(cap 400)" \
    bash "$root/scripts/gpu-measure.sh" "$s/measure" resnet50:64:25
wanted launch && step launch launch
wanted graphs && step graphs graphs
wanted check && step check check
smi >"$s/gpu-after.txt" 2>&1
pack
echo "gpu-session: done in $((seconds - $(left))) s; $out/session.tgz"

#!/usr/bin/env bash
# scripts/gpu-session.sh's plumbing, dry run on the CPU (UCPLAN_SESSION_DEVICE=cpu) with a 12 s
# deadline: it must end inside the deadline with exit 0, record every step it started in
# session/steps.txt, try each golden plan from a measured profile (a CUDA plan, which the CPU refuses
# by name), leave the steps the deadline does not allow, and pack session/ into session.tgz.
# Usage: session_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -uo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
t0=$(date +%s)
UCPLAN_SESSION_DEVICE=cpu UCPLAN_BUILD_DIR=$build bash "$src/scripts/gpu-session.sh" "$work/out" 12 >"$work/session.txt" 2>&1
rc=$?
took=$(($(date +%s) - t0))
cat "$work/session.txt"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "exit $rc"
[ "$took" -le 14 ] || fail "took $took s under a 12 s deadline"
if [ ! -s "$work/out/session.tgz" ] || [ -e "$work/out/session.tgz.part" ]; then
  fail "no session.tgz (or a half-written one)"
fi
mkdir -p "$work/unpacked"
tar xzf "$work/out/session.tgz" -C "$work/unpacked" || fail "session.tgz does not unpack"
u=$work/unpacked/session
for f in steps.txt date.txt version.txt gpu-before.txt gpu-after.txt golden.log validate.log; do
  [ -e "$u/$f" ] || fail "session.tgz lacks session/$f"
done
awk '{print $1}' "$u/steps.txt" | tr '\n' ' ' | grep -q "^golden validate quality measure $" || fail "steps: $(cat "$u/steps.txt")"
golden=$(find "$src/plans" -name '*measured*.json' | wc -l)
[ "$golden" -gt 0 ] || fail "no golden plans from measured profiles in plans/"
tried=$(grep -c "failed" "$u/golden.log")
[ "$tried" -eq "$golden" ] || fail "$tried of $golden golden plans tried: $(cat "$u/golden.log")"
# Every golden replay failed on the CPU (CUDA plans): the step says so (it said 0, as did quality's).
[ "$(awk '$1 == "golden" {print $2}' "$u/steps.txt")" != 0 ] || fail "golden's replays all failed, yet: $(cat "$u/steps.txt")"
[ "$(awk '$1 == "measure" {print $2}' "$u/steps.txt")" = skipped ] || fail "measure not recorded as skipped: $(cat "$u/steps.txt")"
# A chosen step alone (a second device call's), and a step that does not exist refused by name.
UCPLAN_SESSION_DEVICE=cpu UCPLAN_SESSION_STEPS=golden UCPLAN_BUILD_DIR=$build \
  bash "$src/scripts/gpu-session.sh" "$work/one" 12 >"$work/one.txt" 2>&1 || fail "golden alone: $(cat "$work/one.txt")"
[ "$(awk '{print $1}' "$work/one/session/steps.txt" | tr '\n' ' ')" = "golden " ] ||
  fail "golden alone ran: $(cat "$work/one/session/steps.txt")"
# The check step, which no default run takes: recorded when asked (here its compile is cut off by
# the deadline, as a step that overruns it is).
UCPLAN_SESSION_DEVICE=cpu UCPLAN_SESSION_STEPS=check UCPLAN_BUILD_DIR=$build \
  bash "$src/scripts/gpu-session.sh" "$work/check" 12 >"$work/check.txt" 2>&1 || fail "check alone: $(cat "$work/check.txt")"
[ "$(awk '{print $1}' "$work/check/session/steps.txt" | tr '\n' ' ')" = "check " ] ||
  fail "check alone ran: $(cat "$work/check/session/steps.txt")"
[ -e "$work/check/session/check.log" ] || fail "no session/check.log"
# The launch step, asked for alone: keep-all compiled (the CPU refuses to replay or trace it, so
# nothing is calibrated), recorded.
UCPLAN_SESSION_DEVICE=cpu UCPLAN_SESSION_STEPS=launch UCPLAN_BUILD_DIR=$build \
  bash "$src/scripts/gpu-session.sh" "$work/launch" 12 >"$work/launch.txt" 2>&1 || fail "launch alone: $(cat "$work/launch.txt")"
[ "$(awk '{print $1}' "$work/launch/session/steps.txt" | tr '\n' ' ')" = "launch " ] ||
  fail "launch alone ran: $(cat "$work/launch/session/steps.txt")"
[ -e "$work/launch/session/launch/plans/profiled-keep.json" ] ||
  fail "launch: keep-all not compiled: $(cat "$work/launch/session/launch.log")"
# The graphs step, asked for alone: resnet20 keep-all compiled, each replay tried both ways (the
# CPU refuses --cuda-graphs by name), recorded.
UCPLAN_SESSION_DEVICE=cpu UCPLAN_SESSION_STEPS=graphs UCPLAN_BUILD_DIR=$build \
  bash "$src/scripts/gpu-session.sh" "$work/graphs" 12 >"$work/graphs.txt" 2>&1 || fail "graphs alone: $(cat "$work/graphs.txt")"
[ "$(awk '{print $1}' "$work/graphs/session/steps.txt" | tr '\n' ' ')" = "graphs " ] ||
  fail "graphs alone ran: $(cat "$work/graphs/session/steps.txt")"
[ -e "$work/graphs/session/graphs/r20-keep.json" ] || fail "graphs: keep-all not compiled: $(cat "$work/graphs/session/graphs.log")"
tried=$(grep -c "cuda-graphs failed" "$work/graphs/session/graphs.log")
[ "$tried" -ge 2 ] || fail "graphs: $tried replays tried: $(cat "$work/graphs/session/graphs.log")"
UCPLAN_SESSION_STEPS="golden mesure" bash "$src/scripts/gpu-session.sh" "$work/bad" 12 >"$work/bad.txt" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'unknown step "mesure"' "$work/bad.txt"; then
  fail "a misspelt step: exit $rc, $(cat "$work/bad.txt")"
fi
echo "gpu-session dry run: $took s, steps: $(awk '{printf "%s (exit %s) ", $1, $2}' "$u/steps.txt")"

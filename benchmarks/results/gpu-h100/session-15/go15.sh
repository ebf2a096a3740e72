#!/usr/bin/env bash
# Session 15 (2026-11-28), one call, bundle of HEAD: (1) the golden measured plans replayed (an anchor
# against sessions 5 and 8); (2) run --check of today's resnet20 b64 default at 25 %; (3) resnet20 b64
# from the launch-gap-calibrated H100 profile: default, exact and every baseline at 100..25 % of the
# liveness peak, replayed side by side (two rounds, the second reversed); (4) the same for vgg16 b64
# from its measured H100 profile (default, exact, superneurons, checkpoint-sqrt, vdnn-conv, vdnn-all).
set -u
t_end=$(($(date +%s) + ${1:-500}))
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=$OUT/s15; mkdir -p "$o"
left() { echo $((t_end - $(date +%s))); }
ts() { while IFS= read -r l; do echo "$(date +%H:%M:%S) $l"; done; }
pack() { tar czf "$OUT/s15.tgz.part" -C "$OUT" s15 && mv "$OUT/s15.tgz.part" "$OUT/s15.tgz"; }
{ nproc; free -g; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; date -u +%FT%TZ; } >"$o/machine.txt" 2>&1
mkdir -p "$o/golden"
for p in /tmp/g/bundle/plans/*measured*.json; do
  timeout 60 "$U" run "$p" --device cuda --iterations 20 --json >"$o/golden/run-$(basename "$p")" 2>>"$o/golden/err.txt"
done
echo "golden done $(left)" | ts >>"$o/steps.txt"; pack
{ time timeout 90 "$U" run "$here/check/r20-25.json" --device cuda --check --iterations 1 >"$o/check-r20-25.txt"; echo "exit $?"; } 2>&1 | ts >"$o/check-r20-25.err"
echo "check done $(left)" | ts >>"$o/steps.txt"; pack
round() {  # DIR NAME ROUND
  local dir=$1 name=$2 r=$3 plans order p
  mkdir -p "$o/$name"
  plans=$(find "$here/$dir" -maxdepth 1 -name '*.json' | sort)
  order=$plans; [ "$r" = b ] && order=$(sort -r <<<"$plans")
  for p in $order; do
    [ "$(left)" -gt 15 ] || { echo "$name $r: out of time" | ts >>"$o/steps.txt"; return 1; }
    timeout 60 "$U" run "$p" --device cuda --iterations 20 --json >"$o/$name/run-$(basename "$p" .json)-$r.json" 2>"$o/$name/run-$(basename "$p" .json)-$r.err"
    echo "$name $r $(basename "$p" .json): exit $?" | ts >>"$o/$name/rounds.log"
  done
  echo "$name round $r done $(left)" | ts >>"$o/steps.txt"; pack
}
round r20 r20 a && round r20 r20 b
round vgg vgg a && round vgg vgg b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$o/gpu-after.txt" 2>&1
echo "end $(left)" | ts >>"$o/steps.txt"; pack

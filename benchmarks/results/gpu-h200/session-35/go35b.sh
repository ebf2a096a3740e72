#!/usr/bin/env bash
# Session 35, second call: CUDA graphs (ucplan run --cuda-graphs), new in this commit, on the H200.
#   check   ucplan-cuda-check on four plans (resnet20 b64 tight, resnet20 b64 at 6 MiB in 4 rounds of
#           16, the modern and classic check networks): CUDA vs CPU as before, and now also a run with
#           graphs against one without (weights after 3 iterations) and the graph replay's timeline
#   rcheck  ucplan run --check --cuda-graphs on resnet20 tight
#   r20     resnet20 plans from this device's profile (keep-all, default at 100 / 25 %, the 6 MiB one):
#           graphs off and on side by side, 100 iterations, rounds a and b (reversed)
#   eff     efficientnet_b0 b32 from this device's profile, keep-all and the default (input carried),
#           30 iterations, off and on, rounds a and b; traces with graphs
#   golden  HEAD's golden plans from measured H100 profiles, 20 iterations, off and on
set -u
t_end=$(($(date +%s) + ${1:-420}))
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan C=/tmp/g/bundle/ucplan-cuda-check P=$here/plans
o=${OUT:-/tmp/out35b}/s35b; rm -rf "$o"; mkdir -p "$o"
left() { echo $((t_end - $(date +%s))); }
ts() { while IFS= read -r l; do echo "$(date +%H:%M:%S) $l"; done; }
pack() { tar czf "$o.tgz.part" -C "$(dirname "$o")" s35b && mv "$o.tgz.part" "$o.tgz"; }
note() { echo "$* ($(left) s left)" | ts >>"$o/steps.txt"; pack; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; date -u +%FT%TZ; cat /tmp/g/bundle/VERSION; } >"$o/machine.txt" 2>&1
note start
timeout 170 "$C" --require-device "$P/plan-resnet20-b64-tight.json" "$P/r20-sb.json" "$P/plan-modern-b16-tight.json" \
  "$P/plan-classic-b16-fp32.json" >"$o/check.txt" 2>&1
note "check exit $?"
timeout 60 "$U" run "$P/plan-resnet20-b64-tight.json" --device cuda --check --cuda-graphs --iterations 3 >"$o/rcheck.txt" 2>&1
note "rcheck exit $?"
# side NAME N PLAN...: graphs off and on, round a in that order, round b reversed
side() {
  local name=$1 n=$2 r p b g; shift 2
  mkdir -p "$o/$name"
  for r in a b; do
    for p in "$@"; do
      for g in off on; do
        [ "$r" = b ] && { [ "$g" = off ] && g=on || g=off; }
        [ "$(left)" -gt 15 ] || { note "$name: out of time"; return 1; }
        b=$(basename "$p" .json)
        local flag=--no-cuda-graphs; [ "$g" = on ] && flag=--cuda-graphs
        timeout 60 "$U" run "$p" --device cuda --iterations "$n" --json $flag >"$o/$name/run-$b-$g-$r.json" 2>"$o/$name/run-$b-$g-$r.err"
        echo "$name $r $b $g: exit $?" | ts >>"$o/$name/rounds.log"
      done
    done
    note "$name round $r done"
  done
}
side r20 100 "$P/keep.json" "$P/default-100.json" "$P/default-25.json" "$P/r20-sb.json"
for w in keep default; do
  timeout 30 "$U" run "$P/eff-$w.json" --device cuda --iterations 3 --cuda-graphs --trace "$o/trace-eff-$w-graphs.json" >"$o/trace-eff-$w-graphs.txt" 2>&1
done
timeout 30 "$U" run "$P/keep.json" --device cuda --iterations 3 --cuda-graphs --trace "$o/trace-r20-keep-graphs.json" >"$o/trace-r20-keep-graphs.txt" 2>&1
note traces
side eff 30 "$P/eff-keep.json" "$P/eff-default.json"
side golden 20 /tmp/g/bundle/plans/resnet50-b128-h100measured-2914mb.json /tmp/g/bundle/plans/vgg16-b64-h100measured-1960mb.json
note end

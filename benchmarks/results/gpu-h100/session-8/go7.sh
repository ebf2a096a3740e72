#!/usr/bin/env bash
# Session 8 (2026-11-27), one call, bundle of 3ed701e: (1) run --check of resnet20 b64 at 35 % from the
# measured H100 profile, a plan whose buffers the placement's search placed (789 nodes), and its replay;
# (2) gpu-session golden + check (ResNet-50 b64 25 %, search-placed, 3895 nodes here); (3) quality.
set -u
t_end=$(($(date +%s) + ${1:-500}))
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=$OUT/s8; mkdir -p "$o"
ts() { while IFS= read -r l; do echo "$(date +%H:%M:%S) $l"; done; }
pack() { tar czf "$OUT/s8.tgz.part" -C "$OUT" s8 && mv "$OUT/s8.tgz.part" "$OUT/s8.tgz"; }
{ nproc; free -g; nvidia-smi -L; } >"$o/machine.txt" 2>&1
{ time timeout 90 "$U" run "$here/r20m-35.json" --device cuda --check --iterations 1 >"$o/check-r20m-35.txt"; echo "exit $?"; } 2>&1 | ts >"$o/check-r20m-35.err"
timeout 60 "$U" run "$here/r20m-35.json" --device cuda --iterations 20 --json >"$o/run-r20m-35.json" 2>"$o/run-r20m-35.err"
pack
left() { echo $((t_end - $(date +%s))); }
UCPLAN_SESSION_STEPS="golden check" bash /tmp/g/bundle/scripts/gpu-session.sh "$o/a" 230 >"$o/a.log" 2>&1
pack
UCPLAN_SESSION_STEPS="quality" bash /tmp/g/bundle/scripts/gpu-session.sh "$o/b" "$(($(left) - 5))" >"$o/b.log" 2>&1
pack
echo "done, $(left) s left" >>"$o/a.log"
pack

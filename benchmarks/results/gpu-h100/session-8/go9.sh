#!/usr/bin/env bash
# Session 8, third call: resnet20 b64 from the measured H100 profile, keep-all and the default at 35 %:
# replayed (20 iterations) and traced (3 iterations), to see where measured/predicted 1.13 comes from.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=$OUT/t8; mkdir -p "$o"
for p in r20m-keep r20m-35; do
  timeout 40 "$U" run "$here/$p.json" --device cuda --iterations 20 --json >"$o/run-$p.json" 2>"$o/run-$p.err"
  timeout 40 "$U" run "$here/$p.json" --device cuda --iterations 3 --trace "$o/trace-$p.json" >"$o/trace-$p.txt" 2>&1
done
nvidia-smi -L >"$o/gpu.txt" 2>&1; date -u +%FT%TZ >"$o/date.txt"
tar czf "$OUT/t8.tgz" -C "$OUT" t8

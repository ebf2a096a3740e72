#!/usr/bin/env bash
# Session 15, third call: run --check on the GPU of plans no earlier session checked there: exact mode's
# resnet20 b64 plan at 25 %, resnet20 b64 split into sub-batches (--sub-batch any, 6 MiB), and AlexNet
# b256 at 25 % of its liveness peak (sub-batches of 4, 64 rounds) from its measured H100 profile.
set -u
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=$OUT/u15; mkdir -p "$o"
ts() { while IFS= read -r l; do echo "$(date +%H:%M:%S) $l"; done; }
pack() { tar czf "$OUT/u15.tgz.part" -C "$OUT" u15 && mv "$OUT/u15.tgz.part" "$OUT/u15.tgz"; }
for p in r20-exact-25:20 r20-sb:30 alex-25:150; do
  n=${p%%:*}
  { time timeout "${p##*:}" "$U" run "$here/check/$n.json" --device cuda --check --iterations 1 >"$o/check-$n.txt"; echo "exit $?"; } 2>&1 | ts >"$o/check-$n.err"
  pack
done

#!/usr/bin/env bash
# Session 35, fourth call: global average pooling's backward on the small kernel instead of cuDNN's.
#   the kernel check (ucplan-gpu-check: "global avg 7x7" among the pools), ucplan-cuda-check of the
#   modern network's plan (its SE block's global pool), EfficientNet-B0 b32's default plan (compiled
#   before, from the profile measured with cuDNN's backward) replayed, then the network profiled again
#   and its default replayed, without and with CUDA graphs
set -u
t_end=$(($(date +%s) + ${1:-110}))
here=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/g && mkdir -p /tmp/g && tar xzf "$here/bundle.tar.gz" -C /tmp/g
export UCPLAN_BUNDLE_QUIET=1
U=/tmp/g/bundle/ucplan
o=${OUT:-/tmp/out35d}/s35d; rm -rf "$o"; mkdir -p "$o"
left() { echo $((t_end - $(date +%s))); }
pack() { tar czf "$o.tgz.part" -C "$(dirname "$o")" s35d && mv "$o.tgz.part" "$o.tgz"; }
note() { echo "$(date +%H:%M:%S) $* ($(left) s left)" >>"$o/steps.txt"; pack; }
cat /tmp/g/bundle/VERSION >"$o/version.txt"
timeout 40 /tmp/g/bundle/ucplan-gpu-check --require-device >"$o/gpu-check.txt" 2>&1; note "gpu-check exit $?"
timeout 30 /tmp/g/bundle/ucplan-cuda-check --require-device "$here/plan-modern-b16-tight.json" >"$o/cuda-check.txt" 2>&1; note "cuda-check exit $?"
timeout 20 "$U" run "$here/eff-default.json" --device cuda --iterations 20 --json >"$o/run-eff-default-old-plan.json" 2>"$o/run-eff-default-old-plan.err"; note "old plan exit $?"
timeout $(( $(left) - 25 )) "$U" profile "$here/eff.json" --batch 32 --device cuda --sizes undivided --repeat 3 -o "$o/profile-eff.json" >"$o/profile.txt" 2>&1; note "profile exit $?"
"$U" compile "$here/eff.json" --profile "$o/profile-eff.json" --budget 64GiB --reserve 0B -o "$o/eff-default-new.json" >"$o/compile.txt" 2>&1
for g in --no-cuda-graphs --cuda-graphs; do
  [ "$(left)" -gt 8 ] || break
  timeout 15 "$U" run "$o/eff-default-new.json" --device cuda --iterations 20 --json $g >"$o/run-eff-default-new$g.json" 2>"$o/run-eff-default-new$g.err"; note "new plan $g exit $?"
done

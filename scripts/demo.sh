#!/usr/bin/env bash
# The main job on the CPU, end to end on a small network (ResNet-20 for CIFAR, batch 32):
#   1. profile its kernels and transfers on this CPU (measured),
#   2. compile a plan at a budget that forces offload (and recomputation where it pays),
#   3. run the plan with --check: freed regions poisoned, gradients compared with a reference,
#      measured time against predicted;
#   4. the same in bf16 at half the budget (run --check against the exact bf16 emulation).
# Usage: scripts/demo.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
echo "== set-up: installs what is missing, then builds (minutes on a fresh machine; progress below)"
"$root/scripts/setup.sh" "$build"
echo
ucplan="$build/bin/ucplan"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "== ucplan profile resnet20 --batch 32 --device cpu (measured on this machine)"
"$ucplan" profile resnet20 --batch 32 --device cpu --repeat 3 -o "$out/profile.json"
echo
echo "== ucplan inspect resnet20 --batch 32 (memory totals)"
"$ucplan" inspect resnet20 --batch 32 | tail -5
echo
echo "== ucplan compile resnet20 --budget 14MiB  (about a quarter of the 51 MiB liveness peak: offload needed)"
"$ucplan" compile resnet20 --profile "$out/profile.json" --budget 14MiB -o "$out/plan.json"
echo
echo "== ucplan run plan.json --check (CPU backend: streams are threads)"
"$ucplan" run "$out/plan.json" --check --iterations 3
echo
echo "== the same budget with SuperNeurons' strategy (recomputes the cheap layers; ucplan's search"
echo "   tried it and kept offloading, which is cheaper here: copies on a CPU are memcpy)"
"$ucplan" compile resnet20 --profile "$out/profile.json" --budget 14MiB --strategy superneurons -o "$out/plan-sn.json" |
  grep -E "iteration|transfers|recompute"
"$ucplan" run "$out/plan-sn.json" --check --iterations 1 | grep -E "iteration|check"
echo
echo "== the same network in bf16 (issue 15): activations and gradients at 2 bytes, emulated exactly on the CPU"
"$ucplan" inspect resnet20 --batch 32 --precision bf16 | grep -E "precision|liveness peak"
"$ucplan" profile resnet20 --batch 32 --device cpu --repeat 1 --precision bf16 -o "$out/profile-bf16.json" >/dev/null
"$ucplan" compile resnet20 --profile "$out/profile-bf16.json" --precision bf16 --budget 7MiB -o "$out/plan-bf16.json" |
  grep -E "iteration|precision|transfers"
"$ucplan" run "$out/plan-bf16.json" --check --iterations 1 | grep -E "iteration|precision|check"

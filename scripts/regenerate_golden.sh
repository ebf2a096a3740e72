#!/usr/bin/env bash
# Regenerates the golden plans in plans/ (and the modelled profiles they are made from) from the
# current code; `scripts/test.sh` then checks that they are valid and reproducible byte for
# byte. Run after a change that is meant to change plans, and review the diff.
# The measured CPU profile in profiles/cpu/ is a measurement: it is not regenerated here
# (make it with: ucplan profile resnet20 --batch 64 --device cpu -o profiles/cpu/resnet20-b64.json).
# Usage: scripts/regenerate_golden.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
ucplan="$build/bin/ucplan"
cd "$root"
mkdir -p profiles/model plans

profile() {  # network batch device sizes
  "$ucplan" profile "$1" --batch "$2" --device "model:$3" --sizes "$4" -o "profiles/model/$1-b$2-$3.json" >/dev/null
}
profile resnet20 64 k40 powerOfTwo
profile vgg16 256 k40 powerOfTwo
profile alexnet 256 p100 powerOfTwo
profile resnet50 128 h100 powerOfTwo
# Precisions (issue 15): ResNet-20 in bf16 on the H100 model (activations at 2 bytes); small, since
# the GPU bundle carries plans/ and profiles/ within 64 MiB.
"$ucplan" profile resnet20 --batch 64 --device model:h100 --sizes powerOfTwo --precision bf16 \
  -o profiles/model/resnet20-b64-h100-bf16.json >/dev/null

compile() {  # output network profile budget [options...]
  local out=$1 net=$2 prof=$3 budget=$4
  shift 4
  "$ucplan" compile "$net" --profile "$prof" --budget "$budget" "$@" -o "plans/$out.json" -q
  echo "plans/$out.json"
}
# moDNN's setting: a K40 with 12 GiB, VGG-16 at batch 256.
compile vgg16-b256-k40-12gib vgg16 profiles/model/vgg16-b256-k40.json 12GiB
compile vgg16-b256-k40-12gib-vdnn-all vgg16 profiles/model/vgg16-b256-k40.json 12GiB --strategy vdnn-all
# mu-cuDNN's WD setting: AlexNet at batch 256, 120 MiB of workspace in total.
compile alexnet-b256-p100-4gib-wd120mib alexnet profiles/model/alexnet-b256-p100.json 4GiB --workspace wd:120MiB
# ResNet-50 on an H100 at about 60 % of its 10.3 GiB liveness peak (batch-norm: not split).
compile resnet50-b128-h100-6gib resnet50 profiles/model/resnet50-b128-h100.json 6GiB
# bf16 at about a third of its 51.5 MiB liveness peak: offload or recomputation still needed.
compile resnet20-b64-h100-bf16-16mib resnet20 profiles/model/resnet20-b64-h100-bf16.json 16MiB --precision bf16
# ResNet-20 (CIFAR) on the K40 model at a tight budget.
compile resnet20-b64-k40-24mib resnet20 profiles/model/resnet20-b64-k40.json 24MiB
# Measured on an H100 (profiles/h100/, 2026-11-24), at a quarter of the keep-all peak plus the
# profile's reserve for the CUDA context and libraries: the budgets the device ran them at
# (benchmarks/results/gpu-h100.md); now also leaving room for the GPU's mapping of host buffers.
compile resnet50-b128-h100measured-2914mb resnet50 profiles/h100/resnet50-b128.json 2914447616B
compile vgg16-b64-h100measured-1960mb vgg16 profiles/h100/vgg16-b64.json 1959564928B
# Measured on a CPU: small enough to replay with --check in CI.
if [ -f profiles/cpu/resnet20-b64.json ]; then
  compile resnet20-b64-cpu-16mib resnet20 profiles/cpu/resnet20-b64.json 16MiB
  compile resnet20-b64-cpu-4mib-any resnet20 profiles/cpu/resnet20-b64.json 4MiB --sub-batch any
fi

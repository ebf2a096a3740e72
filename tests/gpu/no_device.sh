#!/usr/bin/env bash
# The GPU check programs with every device hidden (CUDA_VISIBLE_DEVICES=""; on a machine without
# a driver nothing changes): "SKIP" and exit 0 when no GPU is required; "FAIL" and exit 3 when one
# is (--require-device or UCPLAN_REQUIRE_GPU=1), for both programs.
# Usage: no_device.sh GPU_CHECK CUDA_CHECK PLAN
set -uo pipefail
gpu_check=$1 cuda_check=$2 plan=$3
failures=0
expect() {  # expect CODE PATTERN COMMAND...
  local code=$1 pattern=$2; shift 2
  local out rc
  out=$(CUDA_VISIBLE_DEVICES= "$@" 2>&1); rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: '$*' exited $rc (want $code) and printed: $out (want /$pattern/)"; failures=$((failures + 1))
  else
    echo "ok: '$*' -> $rc: $out"
  fi
}
expect 0 "^SKIP: ucplan-gpu-check: no d" env -u UCPLAN_REQUIRE_GPU "$gpu_check"
expect 3 "^FAIL: ucplan-gpu-check: a GPU is required: no d" env -u UCPLAN_REQUIRE_GPU "$gpu_check" --require-device
expect 3 "^FAIL: ucplan-gpu-check: a GPU is required" env UCPLAN_REQUIRE_GPU=1 "$gpu_check"
expect 0 "^SKIP: ucplan-gpu-check" env UCPLAN_REQUIRE_GPU=0 "$gpu_check"
expect 2 "usage" "$gpu_check" --no-such-flag
expect 0 "^SKIP: ucplan-cuda-check: no d" env -u UCPLAN_REQUIRE_GPU "$cuda_check" "$plan"
expect 3 "^FAIL: ucplan-cuda-check: a GPU is required" env -u UCPLAN_REQUIRE_GPU "$cuda_check" --require-device "$plan"
exit $((failures > 0))
